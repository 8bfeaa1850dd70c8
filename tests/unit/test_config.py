"""Settings from mirrord.conf, the environment and flags: precedence, defaults and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirrord.config import fixed_changes, load, normalize_whitelist
from mirrord.errors import ConfigError


@pytest.fixture
def conf_dir(tmp_path: Path) -> Path:
    (tmp_path / "consumer.properties").write_text("bootstrap.servers=src:9092\ngroup.id=mm-consumer\n")
    (tmp_path / "producer.properties").write_text("bootstrap.servers=dst:9092\n")
    (tmp_path / "mirrord.conf").write_text(
        "[mirrord]\nwhitelist = prd-.*\nnum.streams = 3\nstate.dir = /srv/state\n"
        "[spark]\nspark.driver.memory = 2g\n")
    return tmp_path


def test_file_values_and_defaults(conf_dir):
    s = load(conf_dir / "mirrord.conf", environ={})
    assert (s.whitelist, s.num_streams, s.spark_master) == ("prd-.*", 3, "local[3]")
    assert s.consumer.properties["bootstrap.servers"] == "src:9092"
    assert s.group_id == "mm-consumer"
    assert s.state_dir == Path("/srv/state/default")
    assert s.spark_conf == {"spark.driver.memory": "2g"}
    assert (s.replication_policy, s.abort_on_send_failure, s.metrics_listen) == ("identity", True, None)


def test_environment_overrides_the_file_and_flags_override_both(conf_dir):
    env = {"MIRRORD_WHITELIST": "env-.*", "MIRRORD_NUM_STREAMS": "5"}
    s = load(conf_dir / "mirrord.conf", {"num.streams": "7"}, environ=env)
    assert (s.whitelist, s.num_streams) == ("env-.*", 7)


def test_extended_interpolation_in_the_ini_file(conf_dir):
    (conf_dir / "mirrord.conf").write_text("[mirrord]\nregion = eu\nwhitelist = ${region}-.*\n")
    with pytest.raises(ConfigError, match="region: unknown setting"):
        load(conf_dir / "mirrord.conf", environ={})
    (conf_dir / "mirrord.conf").write_text("[DEFAULT]\nregion = eu\n[mirrord]\nwhitelist = ${region}-.*\n")
    assert load(conf_dir / "mirrord.conf", environ={}).whitelist == "eu-.*"


@pytest.mark.parametrize(("raw", "expected"), [
    ('"prd-(a|b)-data"', "prd-(a|b)-data"),
    ("orders, payments", "orders|payments"),
    ("x{1,3}", "x{1,3}"),
])
def test_whitelist_follows_mirrormaker_1(raw, expected):
    assert normalize_whitelist(raw) == expected


@pytest.mark.parametrize(("flags", "message"), [
    ({"num.streams": "zero"}, "--num.streams: must be a positive integer, got 'zero'"),
    ({"num.streams": "0"}, "--num.streams: must be a positive integer, got '0'"),
    ({"whitelist": "a("}, "--whitelist: invalid regular expression"),
    ({"metrics.listen": "nowhere"}, "--metrics.listen: must be HOST:PORT"),
    ({"replication.policy": "mirror"}, "--replication.policy: must be 'identity' or 'prefix'"),
    ({"abort.on.send.failure": "maybe"}, "--abort.on.send.failure: must be true or false"),
])
def test_bad_values_name_their_origin(conf_dir, flags, message):
    with pytest.raises(ConfigError) as exc:
        load(conf_dir / "mirrord.conf", flags, environ={})
    assert str(exc.value).startswith("command line: ") and message in str(exc.value)


def test_bad_value_in_file_names_file_and_key(conf_dir):
    (conf_dir / "mirrord.conf").write_text("[mirrord]\nwhitelist = a\nnum.streams = -2\n")
    with pytest.raises(ConfigError, match=rf"^{conf_dir}/mirrord.conf: num.streams: must be a positive integer"):
        load(conf_dir / "mirrord.conf", environ={})


def test_whitelist_is_required(conf_dir):
    (conf_dir / "mirrord.conf").write_text("[mirrord]\n")
    with pytest.raises(ConfigError, match="whitelist: required"):
        load(conf_dir / "mirrord.conf", environ={})


def test_properties_without_bootstrap_servers(conf_dir):
    (conf_dir / "producer.properties").write_text("acks=all\n")
    with pytest.raises(ConfigError, match=r"producer.properties: bootstrap.servers: required"):
        load(conf_dir / "mirrord.conf", environ={})


def test_java_properties_syntax(conf_dir):
    (conf_dir / "consumer.properties").write_text(
        "# comment\nbootstrap.servers = a:1,\\\n  b:2\ngroup.id:g\nsasl.jaas.config=x y\n")
    s = load(conf_dir / "mirrord.conf", environ={})
    assert s.consumer.properties == {"bootstrap.servers": "a:1,b:2", "group.id": "g", "sasl.jaas.config": "x y"}


def test_a_reload_may_not_change_the_flows_identity_state_or_clusters(tmp_path):
    def settings(conf: str = "", group: str = "g", source: str = "s:9092", target: str = "t:9092"):
        (tmp_path / "consumer.properties").write_text(f"bootstrap.servers={source}\ngroup.id={group}\n")
        (tmp_path / "producer.properties").write_text(f"bootstrap.servers={target}\n")
        (tmp_path / "mirrord.conf").write_text(f"[mirrord]\nwhitelist = t.*\n{conf}")
        return load(tmp_path / "mirrord.conf", environ={})

    running = settings()
    assert fixed_changes(running, settings("groups = u.*\n")) == []
    assert fixed_changes(running, settings("num.streams = 3\n")) == ["spark.master"]
    assert fixed_changes(running, settings("flow = other\nstate.dir = /srv\n")) == ["flow", "state.dir"]
    assert fixed_changes(running, settings(group="h", source="s2:9092", target="t2:9092")) == [
        "group.id (consumer.properties)", "bootstrap.servers (consumer.properties)",
        "bootstrap.servers (producer.properties)"]
    assert fixed_changes(running, settings("[spark]\nspark.driver.memory = 2g\n")) == ["[spark]"]
def test_prefix_policy_needs_both_aliases_set_and_different(conf_dir):
    conf = conf_dir / "mirrord.conf"
    conf.write_text("[mirrord]\nwhitelist = a\nreplication.policy = prefix\nsource.alias = left\n")
    with pytest.raises(ConfigError, match=rf"^{conf}: target.alias: must be set with replication.policy=prefix"):
        load(conf, environ={})
    conf.write_text("[mirrord]\nwhitelist = a\nreplication.policy = prefix\nsource.alias = left\n"
                    "target.alias = left\n")
    with pytest.raises(ConfigError, match=rf"^{conf}: target.alias: must differ from source.alias \('left'\)"):
        load(conf, environ={})
    s = load(conf, {"target.alias": "right"}, environ={})
    assert (s.source_alias, s.target_alias) == ("left", "right")


def test_identity_policy_keeps_the_default_aliases(conf_dir):
    s = load(conf_dir / "mirrord.conf", environ={})
    assert (s.source_alias, s.target_alias) == ("source", "target")
