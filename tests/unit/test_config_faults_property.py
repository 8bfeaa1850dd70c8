"""Property-based: a well-formed configuration with exactly one fault in it, through `mirrord --check` as an
operator runs it, is refused with exit 78 and one line that names the file (or flag, or variable) and the
key at fault — and no secret of the configuration appears in that line or anywhere else mirrord wrote.

The configurations are what operators write: a mirrord.conf with valid settings, and consumer and
producer .properties for PLAINTEXT, SASL (PLAIN, SCRAM) or SSL clusters whose passwords, keystore and key
passwords are random. One fault is then injected, often next to a secret (a typo in the keystore's type, a
broken escape on the password's line, a JAAS configuration Kafka cannot parse). The faults only Kafka's
Java client can judge start its check, a JVM each, so they are drawn rarely; the rest run in-process.
"""

from __future__ import annotations

import secrets as random_secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.harness.tls import make_tls
from tests.unit.cli_check import run_check

FILES = ("mirrord.conf", "consumer.properties", "producer.properties")
# Secrets as operators choose them: letters, digits and the punctuation that needs no escaping in a
# .properties value, a JAAS quoted string or an INI value (no quote, backslash, '$' or '%').
SECRET_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#&*+-.^_~@,;:/?()[]{}<>|"
secrets = st.text(SECRET_CHARS, min_size=10, max_size=24).map(lambda s: "S" + s)  # never a pure number
# librdkafka opens the keystore while it checks the settings: its password is the fixture's, random per run.
KEYSTORE_PASSWORD = "S" + random_secrets.token_urlsafe(12)
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass
class Config:
    """One configuration as files (key → value, in order) and the secrets in it."""

    conf: dict[str, str]
    consumer: dict[str, str]
    producer: dict[str, str]
    secrets: list[str] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)  # raw text appended to a file, by file name
    args: list[str] = field(default_factory=lambda: ["--config", "mirrord.conf"])
    env: dict[str, str] = field(default_factory=dict)
    secret_file: str = "consumer.properties"  # the .properties file the fault goes into, where it concerns one

    def files(self) -> dict[str, str]:
        conf = "[mirrord]\n" + "".join(f"{k} = {v}\n" for k, v in self.conf.items())
        consumer = "".join(f"{k}={v}\n" for k, v in self.consumer.items())
        producer = "".join(f"{k}={v}\n" for k, v in self.producer.items())
        out = {"mirrord.conf": conf, "consumer.properties": consumer, "producer.properties": producer}
        return {name: body + self.extra.get(name, "") for name, body in out.items()}


@st.composite
def security(draw, tls_dir: str) -> tuple[dict[str, str], list[str]]:
    """A client's security keys for one of the four protocols, and its secrets."""
    protocol = draw(st.sampled_from(["PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"]))
    props: dict[str, str] = {} if protocol == "PLAINTEXT" else {"security.protocol": protocol}
    found: list[str] = []
    if protocol.startswith("SASL"):
        mechanism = draw(st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]))
        password = draw(secrets)
        module = PLAIN if mechanism == "PLAIN" else SCRAM
        props["sasl.mechanism"] = mechanism
        props["sasl.jaas.config"] = f'{module} required username="mirror" password="{password}";'
        found.append(password)
    if protocol.endswith("SSL"):
        props["ssl.truststore.type"] = "PEM"
        props["ssl.truststore.location"] = f"{tls_dir}/ca.pem"
        if draw(st.booleans()):  # a client certificate too
            key = draw(secrets)
            props.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": f"{tls_dir}/client.p12",
                          "ssl.keystore.password": KEYSTORE_PASSWORD, "ssl.key.password": key})
            found += [KEYSTORE_PASSWORD, key]
    return props, found


@st.composite
def well_formed(draw) -> Config:
    conf = {"whitelist": draw(st.sampled_from(["orders", "prd-.*", "(orders|payments)", "eu\\..+"])),
            "consumer.config": "consumer.properties", "producer.config": "producer.properties",
            "state.dir": "state"}
    optional = {
        "num.streams": st.integers(1, 8).map(str),
        "offset.commit.interval.ms": st.integers(5000, 120_000).map(str),
        "trigger": st.sampled_from(["auto", "real-time", "micro-batch"]),
        "abort.on.send.failure": st.sampled_from(["true", "false"]),
        "metrics.listen": st.integers(1024, 65535).map(lambda p: f"127.0.0.1:{p}"),
        "flow": st.sampled_from(["eu-to-central", "prod2dev", "dr"]),
        "stall.timeout.ms": st.integers(10_000, 600_000).map(str),
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=4)):
        conf[key] = draw(optional[key])
    if draw(st.booleans()):
        conf.update({"replication.policy": "prefix", "source.alias": "east", "target.alias": "central"})
    source, source_secrets = draw(security("tls"))
    target, target_secrets = draw(security("tls"))
    consumer = {"bootstrap.servers": "src-1:9092,src-2:9092", "group.id": "mirrord", **source}
    if draw(st.booleans()):
        consumer["auto.offset.reset"] = draw(st.sampled_from(["earliest", "latest"]))
    producer = {"bootstrap.servers": "dst-1:9092", **target}
    if draw(st.booleans()):
        producer["compression.type"] = draw(st.sampled_from(["none", "lz4", "zstd"]))
    return Config(conf, consumer, producer, source_secrets + target_secrets)


@dataclass(frozen=True)
class Fault:
    name: str
    inject: object  # (Config, draw) -> None: changes the Config in place
    where: str  # the file, flag or variable the error line must name
    key: str  # the key it must name
    java: bool = False  # judged by Kafka's Java client (a JVM): drawn rarely


def _props(cfg: Config, file: str) -> dict[str, str]:
    return cfg.consumer if file == "consumer.properties" else cfg.producer


def _secret_file(cfg: Config, draw) -> str:
    """A .properties file of the configuration, the one with a secret when there is one."""
    with_secret = [f for f in FILES[1:] if any(s in v for v in _props(cfg, f).values() for s in cfg.secrets)]
    return draw(st.sampled_from(with_secret or list(FILES[1:])))


def _conf_value(key: str, bad: str):
    def inject(cfg: Config, draw) -> None:
        cfg.conf[key] = bad
    return inject


def _prop(file: str, key: str, value: str):
    def inject(cfg: Config, draw) -> None:
        _props(cfg, file)[key] = value
    return inject


def _broken_escape(cfg: Config, draw) -> None:
    """A broken \\u escape, on a secret's own line where there is one."""
    file = cfg.secret_file
    props = _props(cfg, file)
    key = next((k for k, v in props.items() if any(s in v for s in cfg.secrets)), "client.id")
    props[key] = props.get(key, "mirror") + "\\u00zz"


def _jks_keystore(cfg: Config, draw) -> None:
    props = _props(cfg, cfg.secret_file)
    props.update({"ssl.keystore.type": "JKS", "ssl.keystore.location": "tls/client.jks",
                  "ssl.keystore.password": props.get("ssl.keystore.password") or draw(secrets)})
    cfg.secrets.append(props["ssl.keystore.password"])


def _jks_truststore(cfg: Config, draw) -> None:
    props = _props(cfg, cfg.secret_file)
    password = draw(secrets)
    props.update({"ssl.truststore.type": "JKS", "ssl.truststore.location": "tls/ca.jks",
                  "ssl.truststore.password": password})
    cfg.secrets.append(password)


def _jaas(module: str, mechanism: str, options: str):
    """A sasl.jaas.config that Kafka's Java client refuses, its password in it."""
    def inject(cfg: Config, draw) -> None:
        props = _props(cfg, cfg.secret_file)
        password = draw(secrets)
        props.update({"security.protocol": "SASL_SSL" if "ssl.truststore.location" in props else "SASL_PLAINTEXT",
                      "sasl.mechanism": mechanism,
                      "sasl.jaas.config": f'{module} {options.format(password=password)};'})
        cfg.secrets.append(password)
    return inject


def _same_aliases(cfg: Config, draw) -> None:
    cfg.conf.update({"replication.policy": "prefix", "source.alias": "dc", "target.alias": "dc"})


def _env(var: str, value: str):
    def inject(cfg: Config, draw) -> None:
        cfg.env[var] = value
    return inject


def _flag(flag: str, value: str):
    def inject(cfg: Config, draw) -> None:
        cfg.args += [f"--{flag}", value]
    return inject


def _same_cluster(cfg: Config, draw) -> None:
    cfg.producer["bootstrap.servers"] = cfg.consumer["bootstrap.servers"]
    cfg.conf.pop("replication.policy", None)


FAULTS = [
    Fault("streams-word", _conf_value("num.streams", "three"), "mirrord.conf", "num.streams"),
    Fault("interval-negative", _conf_value("offset.commit.interval.ms", "-5"), "mirrord.conf",
          "offset.commit.interval.ms"),
    Fault("trigger-unknown", _conf_value("trigger", "continuous"), "mirrord.conf", "trigger"),
    Fault("whitelist-bad-regex", _conf_value("whitelist", "prd-(a|b"), "mirrord.conf", "whitelist"),
    Fault("misspelt-key", _conf_value("num.stream", "2"), "mirrord.conf", "num.stream"),
    Fault("listen-no-port", _conf_value("metrics.listen", "nowhere"), "mirrord.conf", "metrics.listen"),
    Fault("same-aliases", _same_aliases, "mirrord.conf", "target.alias"),
    Fault("offset-reset-none", _prop("consumer.properties", "auto.offset.reset", "none"), "consumer.properties",
          "auto.offset.reset"),
    Fault("auto-commit", _prop("consumer.properties", "enable.auto.commit", "true"), "consumer.properties",
          "enable.auto.commit"),
    Fault("transactional-id", _prop("producer.properties", "transactional.id", "m1"), "producer.properties",
          "transactional.id"),
    Fault("weak-acks", lambda c, d: c.producer.update({"enable.idempotence": "true", "acks": "1"}),
          "producer.properties", "acks"),
    Fault("reordering", lambda c, d: c.producer.update({"enable.idempotence": "false",
                                                        "max.in.flight.requests.per.connection": "5"}),
          "producer.properties", "max.in.flight.requests.per.connection"),
    Fault("protocol-typo-consumer", _prop("consumer.properties", "security.protocol", "TLS"), "consumer.properties",
          "security.protocol"),
    Fault("protocol-typo-producer", _prop("producer.properties", "security.protocol", "TLS"), "producer.properties",
          "security.protocol"),
    Fault("same-cluster", _same_cluster, "producer.properties", "bootstrap.servers"),
    Fault("broken-escape", _broken_escape, "{secret_file}", ""),
    Fault("jks-keystore", _jks_keystore, "{secret_file}", "ssl.keystore.type"),
    Fault("jks-truststore", _jks_truststore, "{secret_file}", "ssl.truststore.type"),
    Fault("env-streams", _env("MIRRORD_NUM_STREAMS", "lots"), "environment", "MIRRORD_NUM_STREAMS"),
    Fault("flag-interval", _flag("offset.commit.interval.ms", "0"), "--offset.commit.interval.ms", ""),
    # no `required` flag: Kafka's parser refuses it
    Fault("jaas-broken", _jaas(PLAIN, "PLAIN", 'username="u" password="{password}"'), "{secret_file}",
          "sasl.jaas.config", java=True),
    Fault("jaas-no-username", _jaas(SCRAM, "SCRAM-SHA-512", 'required password="{password}"'), "{secret_file}",
          "sasl.jaas.config", java=True),
    Fault("producer-typo", _prop("producer.properties", "lingr.ms", "5"), "producer.properties", "lingr.ms",
          java=True),
]
IN_PROCESS = [f for f in FAULTS if not f.java]
JAVA = [f for f in FAULTS if f.java]


@st.composite
def faulty(draw, faults: list[Fault]) -> tuple[Config, Fault]:
    cfg = draw(well_formed())
    fault = draw(st.sampled_from(faults))
    cfg.secret_file = _secret_file(cfg, draw)
    fault.inject(cfg, draw)
    return cfg, fault


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("faults")
    (path / "state").mkdir()
    tls = make_tls(path / "tls")
    subprocess.run(["openssl", "pkcs12", "-export", "-in", str(tls.keystore), "-out", str(path / "tls" / "client.p12"),
                    "-passout", f"pass:{KEYSTORE_PASSWORD}"], check=True, capture_output=True, timeout=60)
    return path


def check(workdir: Path, cfg: Config, capsys, monkeypatch) -> tuple[int, list[str], str]:
    """`mirrord --check` on the configuration's files: exit status, stderr lines, all it wrote."""
    for name, body in cfg.files().items():
        (workdir / name).write_text(body, encoding="latin-1")
    status = run_check(workdir, cfg.args, cfg.env, monkeypatch)
    out = capsys.readouterr()
    return status, out.err.splitlines(), out.out + out.err


def assert_refused(workdir: Path, cfg: Config, fault: Fault, capsys, monkeypatch) -> None:
    status, lines, everything = check(workdir, cfg, capsys, monkeypatch)
    assert status == 78, (fault.name, lines)
    assert len(lines) == 1 and lines[0].startswith("mirrord: "), (fault.name, lines)
    where = fault.where.format(secret_file=cfg.secret_file)
    assert where in lines[0] and fault.key in lines[0], (fault.name, lines[0])
    leaked = [s for s in cfg.secrets if s in everything]
    assert not leaked, (fault.name, leaked, everything)


FUZZ = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))


@settings(FUZZ, max_examples=400)
@given(case=faulty(IN_PROCESS))
def test_one_fault_in_a_well_formed_configuration_is_named_and_no_secret_shows(workdir, capsys, monkeypatch, case):
    assert_refused(workdir, *case, capsys, monkeypatch)


@settings(FUZZ, max_examples=9)
@given(case=faulty(JAVA))
def test_faults_kafkas_java_client_finds_are_named_and_no_secret_shows(workdir, capsys, monkeypatch, case):
    assert_refused(workdir, *case, capsys, monkeypatch)
