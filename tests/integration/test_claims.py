"""README claims that no other test held: each run the way an operator would meet it."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.jvm import spark_section
from tests.harness.kafka import free_port
from tests.harness.mirrord import ROOT, Mirrord, write_flow
from tests.harness.records import count, create_topic, produce, read_all, wait_until


def test_a_daemon_started_with_mirrormaker_1s_command_line_mirrors(kafka_pair, unique, tmp_path):
    """A unit written for kafka-mirror-maker.sh works with the binary swapped (README, Configuration)."""
    source, target = kafka_pair
    topic = unique("mm1")
    create_topic(source.bootstrap, topic, 2)
    produce(source.bootstrap, topic, [{"partition": i % 2, "key": f"k{i}".encode(), "value": b"v"} for i in range(200)])
    (tmp_path / "consumer.properties").write_text(f"bootstrap.servers={source.bootstrap}\ngroup.id={unique('mm1-g')}\n"
                                                  "auto.offset.reset=earliest\n")
    (tmp_path / "producer.properties").write_text(f"bootstrap.servers={target.bootstrap}\nacks=all\n")
    log = tmp_path / "mirrord.log"
    daemon = subprocess.Popen(
        [sys.executable, "-m", "mirrord", "--consumer.config", "consumer.properties", "--producer.config",
         "producer.properties", "--num.streams", "2", f"--whitelist={topic}", "--offset.commit.interval.ms", "500",
         "--abort.on.send.failure", "true", "--state.dir", "state", "--metrics.listen", f"127.0.0.1:{free_port()}"],
        cwd=tmp_path, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
    try:
        wait_until(lambda: count(target.bootstrap, topic) >= 200, 180, "the topic mirrored")
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(90) == 0, log.read_text()[-3000:]
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert [r.key for r in read_all(target.bootstrap, topic)[0]] == [f"k{i}".encode() for i in range(0, 200, 2)]


def test_auto_offset_reset_latest_starts_at_the_end_of_every_partition(kafka_pair, unique, tmp_path):
    source, target = kafka_pair
    topic = unique("latest")
    create_topic(source.bootstrap, topic, 2)
    produce(source.bootstrap, topic, [{"partition": i % 2, "key": b"before", "value": b"v"} for i in range(50)])
    config = write_flow(tmp_path, source.bootstrap, target.bootstrap, topic, group=unique("latest-g"),
                        consumer={"auto.offset.reset": "latest"})
    daemon = Mirrord(config).start()
    try:
        daemon.wait_ready()
        daemon.wait_logged("mirroring ", 120)
        wait_until(lambda: "records mirrored" in daemon.output(), 60, "the query under way")
        produce(source.bootstrap, topic, [{"partition": i % 2, "key": b"after", "value": b"v"} for i in range(50)])
        wait_until(lambda: count(target.bootstrap, topic) >= 50, 120, "the later records mirrored")
        assert daemon.stop() == 0
    finally:
        daemon.stop()
    assert sorted(r.key for rs in read_all(target.bootstrap, topic).values() for r in rs) == [b"after"] * 50


def test_a_reload_rereads_the_properties_files(kafka_pair, unique, tmp_path):
    """SIGHUP re-reads consumer.properties and producer.properties: a client property restarts the query; a
    bad one is refused naming its file and key, and the running configuration goes on."""
    source, target = kafka_pair
    topic = unique("reprops")
    create_topic(source.bootstrap, topic, 1)
    config = write_flow(tmp_path, source.bootstrap, target.bootstrap, topic, group=unique("reprops-g"))
    producer = tmp_path / "producer.properties"
    daemon = Mirrord(config).start()
    try:
        daemon.wait_ready()
        daemon.wait_logged("mirroring ", 120)
        producer.write_text(producer.read_text() + "compression.type=zstd\n")
        daemon.signal(signal.SIGHUP)
        wait_until(lambda: f"reloaded: topics matching '{topic}'\n" in daemon.output(), 60, "a reload that restarts")
        producer.write_text(producer.read_text() + "max.in.flight.requests.per.connection=zero\n")
        daemon.signal(signal.SIGHUP)
        wait_until(lambda: "reload refused" in daemon.output(), 60, "the refusal")
        refusal = next(line for line in daemon.output().splitlines() if "reload refused" in line)
        assert "producer.properties" in refusal and "max.in.flight.requests.per.connection" in refusal, refusal
        produce(source.bootstrap, topic, [{"partition": 0, "key": b"k", "value": b"v"}] * 10)
        wait_until(lambda: count(target.bootstrap, topic) >= 10, 120, "still mirroring")
        assert daemon.stop() == 0
    finally:
        daemon.stop()


def test_a_transform_spark_cannot_run_stops_a_normal_start_with_exit_78(tmp_path):
    """Not only `--check`: the daemon itself refuses it before it mirrors anything."""
    (tmp_path / "consumer.properties").write_text("bootstrap.servers=127.0.0.1:9\ngroup.id=g\n")
    (tmp_path / "producer.properties").write_text("bootstrap.servers=127.0.0.1:10\n")
    (tmp_path / "mirrord.conf").write_text(
        "[mirrord]\nwhitelist = orders\nstate.dir = state\n\n[transform:broken]\ntopics = orders\n"
        "filter = no_such_function(value)\n" + spark_section())
    done = subprocess.run([sys.executable, "-m", "mirrord", "--config", "mirrord.conf"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=240,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 78, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("mirrord: ") and "mirrord.conf: [transform:broken] filter:" in last, last


@pytest.mark.parametrize("conf", ["etc/mirrord.conf", *sorted(str(p.relative_to(ROOT)) for p in
                                                              (ROOT / "etc" / "examples").glob("*/mirrord.conf"))])
def test_the_shipped_configuration_files_pass_check_as_shipped(conf, tmp_path):
    """What the packages install and the recipes show loads as it is: only the state dir moved to a scratch
    one, and files the recipe expects the operator to provide (a CA under /etc/mirrord/NAME/) made there."""
    etc = tmp_path / "etc"
    shutil.copytree(ROOT / Path(conf).parent, etc, dirs_exist_ok=True)
    home = f"/etc/mirrord/{Path(conf).parent.name}/"
    for properties in etc.glob("*.properties"):
        text = properties.read_text()
        for pem in re.findall(rf"^[\w.]+\.location={re.escape(home)}(\S+\.pem)$", text, re.M):
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                            "/CN=test-ca", "-keyout", str(tmp_path / "ca.key"), "-out", str(etc / pem)],
                           check=True, capture_output=True)
        properties.write_text(text.replace(home, f"{etc}/"))
    done = subprocess.run([sys.executable, "-m", "mirrord", "--config", str(tmp_path / "etc" / Path(conf).name),
                           "--check", "--state.dir", str(tmp_path / "state")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=240, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("mirrord: configuration OK; trigger = "), done.stdout
