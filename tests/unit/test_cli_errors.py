"""Every invalid input: one line on stderr naming file, key and reason; exit 78; no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.jvm import spark_section

EX_CONFIG = 78
ROOT = Path(__file__).resolve().parents[2]  # this tree's mirrord, not whichever the virtualenv installed


ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    """mirrord from this source tree (not whichever the virtualenv installed), with a bare environment (but
    for MIRRORD_SPARK_JARS, the jars to test if set)."""
    jars = {"MIRRORD_SPARK_JARS": os.environ["MIRRORD_SPARK_JARS"]} if os.environ.get("MIRRORD_SPARK_JARS") else {}
    return subprocess.run([sys.executable, "-m", "mirrord", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **jars})


SPARK_START = 180  # --check starts a local Spark to analyse transforms: seconds on a quiet machine, more on a busy one


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "consumer.properties").write_text("bootstrap.servers=127.0.0.1:9\ngroup.id=g\n")
    (tmp_path / "producer.properties").write_text("bootstrap.servers=127.0.0.1:10\n")
    return tmp_path


def mm1_flags(consumer="consumer.properties", producer="producer.properties", whitelist="orders"):
    return ["--consumer.config", consumer, "--producer.config", producer, "--whitelist", whitelist]


def assert_config_error(result: subprocess.CompletedProcess, *expected: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == EX_CONFIG, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mirrord: ")
    for part in expected:
        assert part in lines[0], lines[0]
    assert "Traceback" not in result.stderr


def test_missing_file(files):
    assert_config_error(run(*mm1_flags(consumer="nope.properties"), cwd=files), "nope.properties", "file not found")


def test_unreadable_file(files):
    (files / "unreadable.properties").mkdir()
    assert_config_error(run(*mm1_flags(producer="unreadable.properties"), cwd=files),
                        "unreadable.properties", "is a directory")


def test_properties_are_latin1_as_java_reads_them(files):
    (files / "consumer.properties").write_bytes(b"bootstrap.servers=127.0.0.1:9\ngroup.id=caf\xe9\n")
    assert run(*mm1_flags(), "--check", cwd=files).returncode == 0


def test_missing_default_config_file(files):
    assert_config_error(run("--config", "absent/mirrord.conf", cwd=files), "absent/mirrord.conf", "file not found")


def test_properties_without_bootstrap_servers(files):
    (files / "producer.properties").write_text("acks=all\n")
    assert_config_error(run(*mm1_flags(), cwd=files), "producer.properties: bootstrap.servers: required")


def test_invalid_regex(files):
    assert_config_error(run(*mm1_flags(whitelist="prd-(a|b"), cwd=files),
                        "command line: --whitelist: invalid regular expression")


@pytest.mark.parametrize("value", ["three", "0", "-1"])
def test_bad_num_streams(files, value):
    assert_config_error(run(*mm1_flags(), "--num.streams", value, cwd=files),
                        "--num.streams: must be a positive integer")


def test_option_spark_cannot_take(files):
    (files / "consumer.properties").write_text(
        "bootstrap.servers=127.0.0.1:9\ngroup.id=g\ninterceptor.classes=com.example.Audit\n")
    assert_config_error(run(*mm1_flags(), cwd=files), "consumer.properties: interceptor.classes:",
                        "does not support consumer interceptors")


def test_bad_value_in_mirrord_conf(files):
    (files / "mirrord.conf").write_text("[mirrord]\nwhitelist = orders\noffset.commit.interval.ms = soon\n")
    assert_config_error(run("--config", "mirrord.conf", cwd=files),
                        "mirrord.conf: offset.commit.interval.ms: must be a positive integer")


def test_unknown_flag_is_a_config_error(files):
    assert_config_error(run(*mm1_flags(), "--num-streams", "2", cwd=files), "unrecognized arguments")


def test_secrets_stay_out_of_error_messages(files):
    (files / "producer.properties").write_text(
        "bootstrap.servers=127.0.0.1:10\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required password="hunter2";\n')
    result = run(*mm1_flags(), cwd=files)
    assert_config_error(result, "sasl.jaas.config", "username")
    assert "hunter2" not in result.stderr + result.stdout


def test_check_accepts_a_valid_configuration(files):
    result = run(*mm1_flags(), "--check", cwd=files)
    assert (result.returncode, result.stdout.strip()) == (
        0, "mirrord: configuration OK; trigger = auto: real-time mode where the task slots allow, micro-batch "
           "elsewhere"), result.stderr


def test_exactly_once_is_said_by_check_and_refuses_a_source_read_uncommitted(files):
    (files / "mirrord.conf").write_text("[mirrord]\nwhitelist = orders\ndelivery = exactly-once\n")
    result = run("--config", "mirrord.conf", "--check", cwd=files)
    assert result.returncode == 0 and result.stdout.strip().endswith(
        "; delivery = exactly-once: Kafka transactions on the target (its consumers read with "
        "isolation.level=read_committed)"), result.stdout + result.stderr
    (files / "mirrord.conf").write_text("[mirrord]\nwhitelist = orders\ndelivery = twice\n")
    assert_config_error(run("--config", "mirrord.conf", "--check", cwd=files),
                        "mirrord.conf: delivery: must be at-least-once or exactly-once, got 'twice'")
    (files / "mirrord.conf").write_text("[mirrord]\nwhitelist = orders\ndelivery = exactly-once\n")
    with open(files / "consumer.properties", "a") as f:
        f.write("isolation.level=read_uncommitted\n")
    assert_config_error(run("--config", "mirrord.conf", "--check", cwd=files),
                        "consumer.properties: isolation.level: must be read_committed with delivery = exactly-once")


def test_invalid_security_setting_of_the_source_is_a_config_error(files):
    (files / "consumer.properties").write_text("bootstrap.servers=127.0.0.1:9\ngroup.id=g\nsecurity.protocol=TLS\n")
    assert_config_error(run(*mm1_flags(), cwd=files), "consumer.properties: security.protocol:", "Invalid value")


@pytest.mark.parametrize(("file", "line", "expected"), [
    ("producer.properties", "lingr.ms=5", "producer.properties: lingr.ms: not a property of Kafka's Java producer"),
    ("producer.properties", "acks=most", "producer.properties: acks: Invalid value most"),
    ("consumer.properties", "fetch.max.bytes=lots", "consumer.properties: fetch.max.bytes: Invalid value lots"),
])
def test_kafkas_java_clients_judge_the_properties_files_before_spark_starts(files, file, line, expected):
    """Spark's producer and consumer only warn about an unknown key; mirrord asks Kafka's own client classes."""
    with open(files / file, "a") as f:
        f.write(line + "\n")
    assert_config_error(run(*mm1_flags(), "--check", cwd=files), expected)


def test_both_files_faulty_the_producers_first_problem_is_the_one_reported(files):
    """One JVM judges both files; the order and the file named are those of a JVM per file."""
    for name, line in (("producer.properties", "acks=most"), ("consumer.properties", "lingr.ms=5")):
        with open(files / name, "a") as f:
            f.write(line + "\n")
    result = run(*mm1_flags(), "--check", cwd=files)
    assert_config_error(result, "producer.properties: acks: Invalid value most")
    assert "lingr.ms" not in result.stderr


def test_files_whose_names_the_locale_cannot_spell_are_judged_by_the_jvm(files):
    """A bare environment: no locale, so the JVM would mangle a non-ASCII file name; it reads what mirrord opened."""
    (files / "café").mkdir()
    (files / "café" / "producer.properties").write_text("bootstrap.servers=127.0.0.1:10\n")
    (files / "café" / "consumer.properties").write_text("bootstrap.servers=127.0.0.1:9\ngroup.id=g\nlingr.ms=5\n")
    assert_config_error(run(*mm1_flags("café/consumer.properties", "café/producer.properties"), "--check", cwd=files),
                        "café/consumer.properties: lingr.ms: not a property of Kafka's Java consumer")


def test_what_the_jvm_says_is_read_whatever_the_locale(files):
    """A bare environment: no locale, and the JVM's own stdout would print "caf?" for "café"."""
    (files / "producer.properties").write_bytes(b"bootstrap.servers=127.0.0.1:10\ncaf\xe9.ms=5\n")
    assert_config_error(run(*mm1_flags(), "--check", cwd=files),
                        "producer.properties: café.ms: not a property of Kafka's Java producer")


@pytest.mark.parametrize("check", [["--check"], []])
def test_prefix_policy_with_default_aliases_is_refused_at_start_and_by_check(files, check):
    """Two flows of an active/active pair left at `source`/`target` would loop forever."""
    result = run(*mm1_flags(), "--replication.policy", "prefix", *check, cwd=files)
    assert_config_error(result, "source.alias: must be set with replication.policy=prefix")
    result = run(*mm1_flags(), "--replication.policy", "prefix", "--source.alias", "left", "--target.alias", "left",
                 *check, cwd=files)
    assert_config_error(result, "--target.alias: must differ from source.alias ('left')")
def transform_conf(files: Path, **keys: str) -> str:
    body = "".join(f"{k} = {v}\n" for k, v in {"topics": "prd-.*", **keys}.items())
    (files / "mirrord.conf").write_text("[mirrord]\nwhitelist = prd-.*\n\n[transform:dev]\n" + body + spark_section())
    return "mirrord.conf"


def test_check_accepts_transforms_spark_can_run(files):
    conf = transform_conf(files, filter="get_json_object(CAST(value AS STRING), '$.kind') <> 'audit'",
                          sample="0.1", value="regexp_replace(CAST(value AS STRING), 'a', 'b')",
                          **{"drop.headers": "(?i)authorization"})
    done = run("--config", conf, "--check", cwd=files, timeout=SPARK_START)
    assert (done.returncode, done.stdout.strip(), done.stderr.strip()) == (
        0, "mirrord: configuration OK; trigger = auto: real-time mode where the task slots allow, micro-batch "
           "elsewhere; the transform runs in real-time mode (filters and projections)", "")
    assert sorted(p.name for p in files.iterdir()) == ["consumer.properties", "mirrord.conf", "producer.properties"]


@pytest.mark.parametrize(("key", "expression", "reason"), [
    ("filter", "vlaue IS NOT NULL", "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter "
                                    "with name `vlaue` cannot be resolved"),
    ("value", "regexp_replace(CAST(value AS STRING), 'a'", "[PARSE_SYNTAX_ERROR] Syntax error"),
    ("filter", "length(value)", "must give a boolean, got int: length(value)"),
    ("key", "length(key) > 3", "must give binary or a string, got boolean"),
])
def test_check_rejects_a_transform_spark_cannot_run_in_one_line(files, key, expression, reason):
    assert_config_error(run("--config", transform_conf(files, **{key: expression}), "--check", cwd=files,
                            timeout=SPARK_START),
                        f"mirrord.conf: [transform:dev] {key}: {reason}")
