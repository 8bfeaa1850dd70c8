"""Settings from mirrord.conf, the environment and flags: precedence, defaults and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirrord.errors import ConfigError
from mirrord.settings.config import fixed_changes, load, normalize_whitelist


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
    assert (s.whitelist, s.num_streams, s.spark_master) == ("prd-.*", 3, "")
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
    assert fixed_changes(running, settings("num.streams = 3\n")) == ["num.streams"]
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
def write_conf(conf_dir: Path, body: str) -> Path:
    path = conf_dir / "mirrord.conf"
    path.write_text("[mirrord]\nwhitelist = prd-.*\n" + body)
    return path


def test_transform_sections_in_file_order_with_their_expressions_as_written(conf_dir):
    settings = load(write_conf(conf_dir, """
[DEFAULT]
domain = example.com

[transform:sample]
topics = prd-.*
sample = 0.1
drop.headers = authorization, x-secret

[transform:mask-email]
topics = prd-users
filter = get_json_object(CAST(value AS STRING), '$.kind') <> 'audit'
value = regexp_replace(CAST(value AS STRING), '@${domain}', '@***')
"""), environ={})
    sample, mask = settings.transforms
    assert (sample.name, sample.topics, sample.sample, sample.drop_headers, sample.drops) == (
        "sample", "prd-.*", 0.1, "authorization|x-secret", True)
    assert (mask.section, mask.filter, mask.value, mask.sample) == (
        "[transform:mask-email]", "get_json_object(CAST(value AS STRING), '$.kind') <> 'audit'",
        "regexp_replace(CAST(value AS STRING), '@${domain}', '@***')", 1.0)


@pytest.mark.parametrize(("body", "message"), [
    ("[transform:t]\nfilter = true\n", "[transform:t] topics: required"),
    ("[transform:t]\ntopics = a\n", "[transform:t]: does nothing"),
    ("[transform:t]\ntopics = a\nsample = 0\n", "[transform:t] sample: must be a fraction in (0, 1], got '0'"),
    ("[transform:t]\ntopics = a\nsample = 1.5\n", "[transform:t] sample: must be a fraction in (0, 1]"),
    ("[transform:t]\ntopics = a\nsample = ten\n", "[transform:t] sample: must be a fraction in (0, 1]"),
    ("[transform:t]\ntopics = a\nfliter = true\n", "[transform:t] fliter: unknown setting"),
    ("[transform:t]\ntopics = (a\nfilter = true\n", "[transform:t] topics: invalid regular expression"),
    ("[transform:t]\ntopics = a\ndrop.headers = [x\n", "[transform:t] drop.headers: invalid regular expression"),
    ("[transform:a b]\ntopics = a\nfilter = true\n", "[transform:a b]: must be letters, digits"),
    ("[transforms]\ntopics = a\n", "[transforms]: unknown section"),
])
def test_bad_transform_sections_name_file_section_and_key(conf_dir, body, message):
    with pytest.raises(ConfigError) as err:
        load(write_conf(conf_dir, body), environ={})
    assert message in str(err.value)
    assert str(conf_dir / "mirrord.conf") in str(err.value)


def test_topics_exclude_from_file_environment_and_flag(conf_dir):
    path = write_conf(conf_dir, "topics.exclude = prd-internal-.*\n")
    assert load(path, environ={}).topics_exclude == "prd-internal-.*"
    assert load(path, environ={"MIRRORD_TOPICS_EXCLUDE": "prd-tmp-.*"}).topics_exclude == "prd-tmp-.*"
    assert load(path, {"topics.exclude": "a,b"}, environ={}).topics_exclude == "a|b"
    assert load(write_conf(conf_dir, ""), environ={}).topics_exclude == ""
