"""Kafka's own Java clients judge both .properties files in one JVM (`io.mirrord.check.ClientConfigCheck
producer=/dev/fd/N consumer=/dev/fd/M`), and each file's outcome is what it was with a JVM per file: its first
problem raised as that file's ConfigError, the producer's before the consumer's, its JAAS login parsed alone.

The tests that start a JVM use the jars mirrord would (MIRRORD_SPARK_JARS, or a source tree's `make jars`);
the others stand in for the JVM, to reach what a real one seldom does."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mirrord.errors import ConfigError, MirrordError
from mirrord.settings import flow
from mirrord.settings.config import read_properties
from mirrord.settings.translate import JaasLogin

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def configs(directory: Path, producer: str, consumer: str):
    (directory / "producer.properties").write_text("bootstrap.servers=127.0.0.1:10\n" + producer, "latin-1")
    (directory / "consumer.properties").write_text("bootstrap.servers=127.0.0.1:9\ngroup.id=g\n" + consumer,
                                                   "latin-1")
    return ((read_properties(directory / "producer.properties"), "producer"),
            (read_properties(directory / "consumer.properties"), "consumer"))


@pytest.fixture
def jvms(monkeypatch) -> list[list[str]]:
    """The command lines of the JVMs the check starts (still started)."""
    started: list[list[str]] = []
    real = subprocess.run

    def run(args, **kwargs):
        started.append(list(args))
        return real(args, **kwargs)
    monkeypatch.setattr(flow.subprocess, "run", run)
    return started


def raised(check: flow.JavaClientCheck, kind: str) -> str:
    with pytest.raises(MirrordError) as exc:
        check.login(kind)
    return str(exc.value)


def test_one_jvm_judges_both_files_and_each_keeps_its_own_first_problem(tmp_path, jvms):
    files = configs(tmp_path, "lingr.ms=5\nacks=most\n", "fetch.max.bytes=lots\n")
    check = flow.check_java_clients(*files)
    assert len(jvms) == 1
    assert [a.split("=")[0] for a in jvms[0][-2:]] == ["producer", "consumer"]
    assert all(a.split("=")[1].startswith("/dev/fd/") for a in jvms[0][-2:])
    with pytest.raises(ConfigError) as exc:
        check.login("producer")
    assert (exc.value.file, exc.value.key) == (str(tmp_path / "producer.properties"), "acks")
    assert exc.value.reason.startswith("Invalid value most for configuration acks")
    with pytest.raises(ConfigError) as exc:
        check.login("consumer")
    assert (exc.value.file, exc.value.key) == (str(tmp_path / "consumer.properties"), "fetch.max.bytes")


def test_each_files_jaas_login_is_its_own_and_a_clean_file_next_to_a_faulty_one_passes(tmp_path, jvms):
    files = configs(tmp_path, f'sasl.mechanism=PLAIN\nsasl.jaas.config={PLAIN} required username="to" '
                              'password="p\\\\"w";\n',
                    f'sasl.mechanism=PLAIN\nsasl.jaas.config={PLAIN} required username="from" password="q";\n')
    check = flow.check_java_clients(*files)
    assert check.login("producer") == JaasLogin(PLAIN, {"username": "to", "password": 'p"w'})
    assert check.login("consumer") == JaasLogin(PLAIN, {"username": "from", "password": "q"})
    check = flow.check_java_clients(*configs(tmp_path, "", "lingr.ms=5\n"))
    assert check.login("producer") is None
    assert raised(check, "consumer").endswith("consumer.properties: lingr.ms: not a property of Kafka's Java consumer")
    assert len(jvms) == 2


def test_a_file_gone_since_it_was_read_is_named_and_the_other_still_judged(tmp_path, jvms):
    files = configs(tmp_path, "lingr.ms=5\n", "")
    (tmp_path / "consumer.properties").unlink()
    check = flow.check_java_clients(*files)
    assert raised(check, "producer").endswith("producer.properties: lingr.ms: not a property of Kafka's Java producer")
    assert raised(check, "consumer") == (f"cannot check {tmp_path / 'consumer.properties'} with Kafka's Java "
                                         f"consumer: [Errno 2] No such file or directory: "
                                         f"'{tmp_path / 'consumer.properties'}'")
    assert [a.split("=")[0] for a in jvms[0][-1:]] == ["producer"]


def fake_jvm(monkeypatch, answer) -> list[tuple[list[str], bytes]]:
    """Stands in for the JVM: `answer(args, stdin bytes)` gives (status, stdout, stderr); the calls, recorded."""
    calls: list[tuple[list[str], bytes]] = []

    def run(args, **kwargs):
        stdin = kwargs.get("stdin")
        data = stdin.read() if hasattr(stdin, "read") else b""
        calls.append((list(args), data))
        assert kwargs["start_new_session"] and kwargs["timeout"] == 60
        status, out, err = answer(args, data)
        return subprocess.CompletedProcess(args, status, out.encode(), err.encode())
    monkeypatch.setattr(flow.subprocess, "run", run)
    return calls


def test_a_file_the_jvm_cannot_read_is_named_and_the_other_file_judged(tmp_path, monkeypatch):
    fake_jvm(monkeypatch, lambda args, stdin: (
        2, "producer\tjaas\tm\tusername\tu\n",
        "consumer\tClientConfigCheck: cannot read the properties: Malformed \\\\uxxxx encoding.\n"))
    check = flow.check_java_clients(*configs(tmp_path, "", ""))
    assert check.login("producer") == JaasLogin("m", {"username": "u"})
    assert raised(check, "consumer") == (f"cannot check {tmp_path / 'consumer.properties'} with Kafka's Java consumer: "
                                         "ClientConfigCheck: cannot read the properties: Malformed \\\\uxxxx encoding.")


@pytest.mark.parametrize(("status", "stdout"), [(2, ""), (1, ""), (134, "producer\tlingr.ms\tnot a property\n")])
def test_a_jvm_that_fails_fails_each_files_check_with_what_it_said(tmp_path, monkeypatch, status, stdout):
    fake_jvm(monkeypatch, lambda args, stdin: (
        status, stdout, "ClientConfigCheck: slf4j-api is not on the class path, and Kafka's clients need it\n"))
    check = flow.check_java_clients(*configs(tmp_path, "", ""))
    for kind in ("producer", "consumer"):
        assert raised(check, kind) == (f"cannot check {tmp_path / f'{kind}.properties'} with Kafka's Java {kind}: "
                                       "ClientConfigCheck: slf4j-api is not on the class path, and Kafka's clients "
                                       "need it")


def test_a_jvm_that_cannot_start_or_hangs_fails_each_files_check(tmp_path, monkeypatch):
    def hang(args, **kwargs):
        raise subprocess.TimeoutExpired(args, 60)
    monkeypatch.setattr(flow.subprocess, "run", hang)
    check = flow.check_java_clients(*configs(tmp_path, "", ""))
    assert raised(check, "producer").startswith(f"cannot check {tmp_path / 'producer.properties'} with Kafka's Java "
                                                "producer: Command ")
    assert "timed out after 60 seconds" in raised(check, "consumer")
