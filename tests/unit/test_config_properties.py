"""Property-based: whatever mirrord.conf, the .properties files, the environment and the flags say, loading
them (and translating the clients' properties) ends in Settings or in a one-line ConfigError, nothing else.

10 000 generated inputs in all (hypothesis), from the keys and values that matter mixed with any text
and any bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirrord.errors import ConfigError
from mirrord.settings import translate
from mirrord.settings.config import ENV_PREFIX, KEYS, Settings, load

FUZZ = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))
SCRAM = translate.JaasLogin("org.apache.kafka.common.security.scram.ScramLoginModule",
                            {"username": "u", "password": "p"})

any_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)
values = st.one_of(
    st.sampled_from(["", " ", "0", "-1", "1", "7", "1.5", "true", "false", "maybe", "none", "off", "${x}", "$", "%",
                     "$$", "${mirrord:flow}", "(", "[", "a,b", "x{1,3}", ":80", "[::1]:80", "h:0", "h:65536", "prefix",
                     "identity", "\\", '"orders"', "orders, payments", "é", "a\tb", "earliest", "latest", "all",
                     "PEM", "JKS", "PKCS12", "SSL", "SASL_SSL", "PLAIN"]),
    any_text)
mirrord_keys = st.one_of(st.sampled_from(sorted(KEYS)), any_text)
client_keys = st.one_of(st.sampled_from([
    "bootstrap.servers", "group.id", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
    "value.serializer", "interceptor.classes", "exclude.internal.topics", "acks", "enable.idempotence",
    "transactional.id", "mirrord.x", "partitioner.class", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.keystore.type", "ssl.keystore.location",
    "max.in.flight.requests.per.connection"]), any_text)


def ini_line(key: str, value: str, kind: int, header: str) -> str:
    return [f"{key} = {value}", f"{key}: {value}", f"[{header}]", f"  {value}", f"# {value}", value,
            f"{key}={value}", f"{key}"][kind]


ini_lines = st.lists(st.builds(ini_line, mirrord_keys, values, st.integers(0, 7),
                               st.sampled_from(["mirrord", "spark", "DEFAULT", "kafka", ""])), max_size=8)
ini_files = st.one_of(
    st.builds(lambda lines, start: (start + "\n".join(lines) + "\n").encode(), ini_lines,
              st.sampled_from(["", "[mirrord]\nwhitelist = t\n", "[DEFAULT]\nx = 1\n[mirrord]\n"])),
    st.binary(max_size=64))
properties_lines = st.lists(st.builds(lambda k, v, sep: f"{k}{sep}{v}", client_keys, values,
                                      st.sampled_from(["=", ":", " ", " = ", "\\=", "=\\u00", "=\\\n "])),
                            max_size=6)
properties_files = st.one_of(
    st.builds(lambda lines, base, encoding: (base + "\n".join(lines) + "\n").encode(encoding, "replace"),
              properties_lines, st.sampled_from(["", "bootstrap.servers=h:1\n"]),
              st.sampled_from(["latin-1", "utf-8"])),
    st.binary(max_size=64))
setting_maps = st.dictionaries(st.sampled_from(sorted(KEYS)), values, max_size=4)


def load_and_translate(config: Path | None, flags: dict[str, str], environ: dict[str, str]) -> None:
    """Nothing but ConfigError, and its message on one line (stderr gets exactly one)."""
    try:
        s = load(config, flags, environ)
        assert isinstance(s, Settings)
        translate.consumer_to_spark(s.consumer)
        translate.sink_options(s.producer)
        for cfg in (s.consumer, s.producer):
            translate.admin_settings(cfg, SCRAM if "sasl.jaas.config" in cfg.properties else None)
    except ConfigError as exc:
        assert len(str(exc).splitlines()) == 1, repr(str(exc))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fuzz")
    (path / "consumer.properties").write_text("bootstrap.servers=src:9092\n")
    (path / "producer.properties").write_text("bootstrap.servers=dst:9092\n")
    return path


@settings(FUZZ, max_examples=4000)
@given(conf=ini_files)
def test_any_mirrord_conf_loads_or_is_a_config_error(workdir, conf):
    (workdir / "mirrord.conf").write_bytes(conf)
    load_and_translate(workdir / "mirrord.conf", {}, {})


@settings(FUZZ, max_examples=3000)
@given(consumer=properties_files, producer=properties_files)
def test_any_properties_files_load_or_are_a_config_error(workdir, consumer, producer):
    (workdir / "c.properties").write_bytes(consumer)
    (workdir / "p.properties").write_bytes(producer)
    load_and_translate(None, {"consumer.config": str(workdir / "c.properties"),
                              "producer.config": str(workdir / "p.properties"), "whitelist": "t"}, {})


@settings(FUZZ, max_examples=3000)
@given(env=setting_maps, flags=setting_maps)
def test_any_environment_and_flags_load_or_are_a_config_error(workdir, env, flags):
    (workdir / "mirrord.conf").write_text("[mirrord]\nwhitelist = t\n")
    environ = {ENV_PREFIX + k.upper().replace(".", "_"): v for k, v in env.items()}
    load_and_translate(workdir / "mirrord.conf", flags, environ)
