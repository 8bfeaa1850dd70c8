"""Secrets nowhere: a flow over SASL (SCRAM-SHA-512) and SSL (PEM trust store), and the password in none of
what mirrord and Spark printed (journald's lines), its metrics, its STATUS lines, --check and its errors."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness.kafka import SCRAM_USER
from tests.harness.mirrord import ROOT, Mirrord, mirrord_command, write_flow
from tests.harness.notify import NotifySocket
from tests.harness.records import committed_offsets, create_topic, end_offsets, produce, read_all, wait_until

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def secured_flow(directory: Path, source, target, topic: str, group: str, password: str, *,
                 consumer: dict[str, str] | None = None) -> Path:
    """Source over SASL_PLAINTEXT with SCRAM-SHA-512, target over SSL with a PEM trust store."""
    jaas = f'{SCRAM} required username="{SCRAM_USER}" password="{password}";'
    return write_flow(directory, source.sasl_bootstrap, target.ssl_bootstrap, topic, group=group,
                      consumer={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                                "sasl.jaas.config": jaas, **(consumer or {})},
                      producer={"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                "ssl.truststore.location": str(target.tls.ca)})


def run_cli(config: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*mirrord_command(), "--config", str(config), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_a_flow_over_sasl_and_ssl_copies_every_byte_and_never_shows_the_password(kafka_pair, unique, tmp_path):
    source, target = kafka_pair
    password = source.scram_users[SCRAM_USER]
    topic, group = unique("secured"), unique("secured-group")
    create_topic(source.bootstrap, topic, 2)
    now = int(time.time() * 1000)  # within the brokers' 7-day retention
    records = [{"partition": i % 2, "key": f"k{i}".encode(), "value": os.urandom(i % 200),
                "headers": [("h", bytes([i % 256]))], "timestamp": now - 1000 + i} for i in range(400)]
    produce(source.bootstrap, topic, records)
    config = secured_flow(tmp_path / "flow", source, target, topic, group, password)

    check = run_cli(config, "--check")
    assert (check.returncode, check.stdout.strip().split(";")[0]) == (0, "mirrord: configuration OK"), check.stderr

    notify = NotifySocket(tmp_path / "notify.sock")
    daemon = Mirrord(config, env=notify.env()).start()
    metrics = ""
    try:
        daemon.wait_ready()
        ends = end_offsets(source.bootstrap, topic)
        wait_until(lambda: committed_offsets(source.bootstrap, group, topic) == ends, 120, "the topic mirrored")
        src, dst = read_all(source.bootstrap, topic), read_all(target.bootstrap, topic)
        for p in src:
            assert [r.fields() for r in dst[p]] == [r.fields() for r in src[p]], f"partition {p} differs"
        wait_until(lambda: len(notify.lines("STATUS=")) >= 2, 30, "a STATUS line after READY's")
        metrics = daemon.metrics()
        assert daemon.stop() == 0
    finally:
        daemon.stop()
        notify.close()

    translated = subprocess.run([*mirrord_command(), "offsets", "translate", "--config", str(config), "--group", group],
                                cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert translated.returncode == 0, translated.stderr
    rows = [line.split("\t") for line in translated.stdout.splitlines()[1:] if line.startswith(topic + "\t")]
    assert {(r[1], r[4]) for r in rows} == {("0", "200"), ("1", "200")}, translated.stdout  # resume after the 400
    output, status = daemon.output(), "\n".join(notify.lines("STATUS="))
    assert "mirroring 127.0.0.1" in output and "records mirrored" in status and "mirrord_records_total" in metrics
    for name, text in {"output": output, "STATUS": status, "/metrics": metrics,
                       "--check": check.stdout + check.stderr,
                       "offsets translate": translated.stdout + translated.stderr}.items():
        assert password not in text, f"the password is in mirrord's {name}"


def test_a_refused_login_is_named_in_the_journal_without_the_password(kafka_pair, unique, tmp_path):
    """A wrong password: the operator reads that the source refused the login (not only that it is unreachable),
    and neither the wrong password nor the right one appears anywhere."""
    source, target = kafka_pair
    password = source.scram_users[SCRAM_USER]
    wrong = "Wr0ng-" + password[::-1]
    topic = unique("refused")
    create_topic(source.bootstrap, topic, 1)
    config = secured_flow(tmp_path / "flow", source, target, topic, unique("refused-group"), wrong)
    notify = NotifySocket(tmp_path / "notify.sock")
    daemon = Mirrord(config, env=notify.env()).start()
    try:
        wait_until(lambda: "authentication failed" in daemon.output().lower(), 120, "the refused login named")
    finally:
        daemon.stop()
        notify.close()
    output, status = daemon.output(), "\n".join(notify.lines("STATUS="))
    for secret in (password, wrong):
        assert secret not in output and secret not in status, "a password is in mirrord's output or STATUS"


@pytest.mark.parametrize(("consumer", "expected"), [
    ({"fetch.max.byte": "1"}, "consumer.properties: fetch.max.byte: not a property of Kafka's Java consumer"),
    ({"sasl.jaas.config": f'{SCRAM} required username="{SCRAM_USER}" password="PASSWORD"'},
     "consumer.properties: sasl.jaas.config: not a valid JAAS configuration"),
    ({"sasl.jaas.config": f'{SCRAM} required password="PASSWORD";'},
     "consumer.properties: sasl.jaas.config: ScramLoginModule needs the username and password options"),
    ({"sasl.mechanism": "SCRAM-SHA-999"}, "SCRAM-SHA-999"),
])
def test_a_configuration_error_beside_the_password_never_echoes_it(kafka_pair, unique, tmp_path, consumer, expected):
    source, target = kafka_pair
    password = source.scram_users[SCRAM_USER]
    consumer = {k: v.replace("PASSWORD", password) for k, v in consumer.items()}
    config = secured_flow(tmp_path, source, target, unique("bad"), unique("bad-group"), password, consumer=consumer)
    result = run_cli(config, "--check")
    assert result.returncode == 78, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and expected in result.stderr, result.stderr
    assert password not in result.stdout + result.stderr
