"""mirrord.service under a real systemd, driven with systemctl as an operator would, checked on the clusters.

One container and one deployment for the module (booting is cheap, starting Spark is not); each
test brings the unit into the state it needs, so any one of them also runs alone.
"""

from __future__ import annotations

import contextlib
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.harness.container import Container
from tests.harness.mirrord import write_flow
from tests.harness.records import create_topic, end_offsets, produce, read_all, wait_until
from tests.system.units import boot, flow_files, install_config, install_from_tree, unit_state

pytestmark = pytest.mark.system

START_TIMEOUT = 240  # a cold JVM and Spark on a busy two-CPU test machine; the unit allows 180 s
ARRIVAL_TIMEOUT = 120


@dataclass
class Deployment:
    c: Container
    source: str
    target: str
    prefix: str
    config: Path  # the host copy of /etc/mirrord

    def topic(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def metrics(self) -> str:
        listen = next(line.split("=", 1)[1].strip() for line in (self.config / "mirrord.conf").read_text().splitlines()
                      if line.startswith("metrics.listen"))
        with urllib.request.urlopen(f"http://{listen}/metrics", timeout=5) as r:
            return r.read().decode()

    def install(self, **conf: str) -> None:
        """(Re)write /etc/mirrord from the host copy, with `conf` overriding mirrord.conf keys."""
        path = self.config / "mirrord.conf"
        lines = path.read_text().splitlines()
        for key, value in conf.items():
            lines = [f"{key} = {value}" if line.split("=", 1)[0].strip() == key else line for line in lines]
        path.write_text("\n".join(lines) + "\n")
        install_config(self.c, "/etc/mirrord", flow_files(self.config))

    def systemctl(self, *args: str, unit: str = "mirrord") -> None:
        """systemctl VERB UNIT; on failure the error carries the unit's journal."""
        proc = self.c.run("systemctl", *args, unit, check=False, timeout=START_TIMEOUT)
        assert proc.returncode == 0, (f"systemctl {' '.join(args)} {unit} exited {proc.returncode}: "
                                      f"{proc.stderr}\n{self.c.journal(unit)[-8000:]}")

    def running(self) -> None:
        if self.c.run("systemctl", "is-active", "mirrord", check=False).stdout.strip() != "active":
            self.systemctl("start")

    def send(self, topic: str, tag: str, n: int = 100) -> set[bytes]:
        keys = [f"{tag}-{i}".encode() for i in range(n)]
        produce(self.source, topic, [{"partition": i % 2, "key": k, "value": b"v" * 64} for i, k in enumerate(keys)])
        return set(keys)

    def committed(self, topic: str) -> dict[int, int]:
        """The flow's consumer group offsets in the source, as kafka-consumer-groups reports them."""
        consumer = Consumer({"bootstrap.servers": self.source, "group.id": f"{self.prefix}-group"})
        try:
            parts = [TopicPartition(topic, p) for p in end_offsets(self.source, topic)]
            return {tp.partition: tp.offset for tp in consumer.committed(parts, timeout=30)}
        finally:
            consumer.close()

    def mirrored(self, topic: str) -> list[bytes]:
        return [r.key for records in read_all(self.target, topic).values() for r in records]

    def wait_mirrored(self, topic: str, keys: set[bytes], what: str) -> None:
        try:
            wait_until(lambda: keys <= set(self.mirrored(topic)), ARRIVAL_TIMEOUT, what, interval=1)
        except AssertionError as exc:
            missing = len(keys - set(self.mirrored(topic)))
            raise AssertionError(f"{exc}: {missing} of {len(keys)} records missing in the target\n"
                                 f"{self.c.journal('mirrord')[-6000:]}") from None


@pytest.fixture(scope="module")
def deployment(kafka_pair, tmp_path_factory):
    source, target = kafka_pair
    prefix = f"sys-{uuid.uuid4().hex[:6]}"
    config = write_flow(tmp_path_factory.mktemp("etc-mirrord"), source.bootstrap, target.bootstrap,
                        f"{prefix}-a-.*", group=f"{prefix}-group",
                        conf={"flow": "main", "state.dir": "/var/lib/mirrord"}).parent
    c = boot()
    try:
        install_from_tree(c)
        d = Deployment(c, source.bootstrap, target.bootstrap, prefix, config)
        d.install()
        create_topic(d.source, d.topic("a-1"), 2)
        yield d
    finally:
        c.stop()


def test_start_returns_once_ready_and_records_flow(deployment):
    d = deployment
    d.systemctl("start")

    state = unit_state(d.c, "mirrord")
    assert (state["ActiveState"], state["SubState"]) == ("active", "running"), state
    # READY=1 came once the streaming query ran: the daemon reports it up the moment start returns.
    assert 'mirrord_up{flow="main"} 1.0' in d.metrics()
    assert "records mirrored" in state["StatusText"], state
    assert d.c.show("mirrord", "WatchdogUSec") == "30s"

    keys = d.send(d.topic("a-1"), "start")
    d.wait_mirrored(d.topic("a-1"), keys, "records produced after start")
    assert unit_state(d.c, "mirrord")["NRestarts"] == "0"


def test_reload_picks_up_a_changed_whitelist_without_loss(deployment):
    d = deployment
    d.running()
    before = unit_state(d.c, "mirrord")
    a, b = d.topic("a-1"), d.topic("b-1")
    create_topic(d.source, b, 2)
    early_b = d.send(b, "before-reload")
    early_a = d.send(a, "before-reload")
    d.wait_mirrored(a, early_a, "records of a whitelisted topic")
    assert d.mirrored(b) == [], "a topic outside the whitelist was mirrored"

    mark = d.c.journal_cursor()
    d.install(whitelist=f"{d.prefix}-a-.*|{d.prefix}-b-.*")
    d.systemctl("reload")
    during_a = d.send(a, "during-reload")
    wait_until(lambda: "reloaded: topics matching" in d.c.journal("mirrord", after=mark), 60, "the reload")
    late_a, late_b = d.send(a, "after-reload"), d.send(b, "after-reload")

    d.wait_mirrored(b, early_b | late_b, "records of the newly whitelisted topic")
    d.wait_mirrored(a, early_a | during_a | late_a, "records produced across the reload")
    assert "streaming query stopped cleanly" in d.c.journal("mirrord", after=mark)
    for topic in (a, b):
        keys = d.mirrored(topic)
        assert len(keys) == len(set(keys)), f"{topic}: {len(keys) - len(set(keys))} records copied twice"
    after = unit_state(d.c, "mirrord")
    assert after["ActiveState"] == "active", after
    assert (after["MainPID"], after["NRestarts"]) == (before["MainPID"], before["NRestarts"]), (before, after)


def refused_reload(d: Deployment, before: dict[str, str], reason: str, tag: str, **conf: str) -> None:
    """Install `conf`, reload, and see the reload refused for `reason` and mirroring go on in the same process."""
    mark = d.c.journal_cursor()
    d.install(**conf)
    d.systemctl("reload")
    wait_until(lambda: "reload refused" in d.c.journal("mirrord", after=mark), 60, "the refusal in the journal")
    assert reason in d.c.journal("mirrord", after=mark)
    # The journal line and READY=1 travel on different sockets: PID 1 may see READY a moment later.
    after = wait_until(lambda: (s := unit_state(d.c, "mirrord"))["ActiveState"] != "reloading" and s,
                       30, "the unit to leave the reloading state")
    assert (after["ActiveState"], after["MainPID"]) == ("active", before["MainPID"]), (before, after)
    topic = d.topic("a-1")
    d.wait_mirrored(topic, d.send(topic, tag), f"records {tag}")


@contextlib.contextmanager
def short_watchdog(d: Deployment, seconds: int):
    """The unit with WatchdogSec=`seconds` and RestartSec=1, restarted; yields its state before any fault."""
    dropin = "/etc/systemd/system/mirrord.service.d/50-short-watchdog.conf"
    d.c.write_file(dropin, f"[Service]\nWatchdogSec={seconds}\nRestartSec=1\n")
    try:
        d.c.run("systemctl", "daemon-reload")
        d.systemctl("restart")
        yield unit_state(d.c, "mirrord")
    finally:
        d.c.run("rm", "-f", dropin)
        d.c.run("systemctl", "daemon-reload")


def wait_restarted(d: Deployment, frozen: dict[str, str], what: str) -> None:
    def restarted() -> bool:
        s = unit_state(d.c, "mirrord")
        return (int(s["NRestarts"]) > int(frozen["NRestarts"]) and s["ActiveState"] == "active"
                and s["SubState"] == "running" and s["MainPID"] not in ("0", frozen["MainPID"]))
    wait_until(restarted, START_TIMEOUT, what, interval=1)


def test_reload_of_a_broken_configuration_is_refused_and_mirroring_goes_on(deployment):
    d = deployment
    d.running()
    before = unit_state(d.c, "mirrord")
    good = (d.config / "mirrord.conf").read_text()
    try:
        refused_reload(d, before, "num.streams", "after-refused-reload", **{"num.streams": "many"})
        (d.config / "mirrord.conf").write_text(good)
        # a new checkpoint and group: a full re-copy, so it waits for a restart
        refused_reload(d, before, "flow cannot change while mirrord runs", "after-refused-flow-change", flow="renamed")
    finally:
        (d.config / "mirrord.conf").write_text(good)
        d.install()


def test_watchdog_kills_a_frozen_mirrord_and_the_restart_resumes_without_loss(deployment):
    d = deployment
    with short_watchdog(d, 5) as frozen:
        topic = d.topic("a-1")
        mark = d.c.journal_cursor()

        d.c.run("kill", "-STOP", frozen["MainPID"])
        keys = d.send(topic, "while-frozen")
        wait_restarted(d, frozen, "systemd to restart the frozen mirrord")
        journal = d.c.journal("mirrord", after=mark)
        assert "Watchdog timeout" in journal and "Failed with result 'watchdog'" in journal, journal[-4000:]

        keys |= d.send(topic, "after-watchdog")
        d.wait_mirrored(topic, keys, "records produced while frozen and after the restart")


def test_watchdog_restarts_mirrord_within_watchdogsec_plus_5_s_when_its_jvm_is_frozen(deployment):
    """The fault campaign's systemd part: SIGSTOP of Spark's JVM (a hung JVM) while Python runs on."""
    d = deployment
    watchdog = 5
    with short_watchdog(d, watchdog) as frozen:
        # "Spark[S]ubmit": the shell's own command line must not match
        jvm = d.c.run("sh", "-c", "for p in /proc/[0-9]*; do grep -qa 'Spark[S]ubmit' $p/cmdline 2>/dev/null "
                      "&& echo ${p#/proc/}; done; true").stdout.split()
        assert len(jvm) == 1, jvm
        mark = d.c.journal_cursor()
        d.c.run("kill", "-STOP", jvm[0])
        stopped = time.monotonic()
        wait_until(lambda: "Watchdog timeout" in d.c.journal("mirrord", after=mark), watchdog + 5,
                   f"systemd's watchdog within WatchdogSec ({watchdog}s) + 5 s of the JVM freezing", interval=0.5)
        print(f"watchdog fired {time.monotonic() - stopped:.1f}s after SIGSTOP of the JVM")
        wait_restarted(d, frozen, "systemd to restart mirrord")
        topic = d.topic("a-1")
        d.wait_mirrored(topic, d.send(topic, "after-frozen-jvm"), "records after the restart")


def test_stop_is_clean_and_leaves_nothing_uncommitted(deployment):
    d = deployment
    d.running()
    topic = d.topic("a-1")
    d.wait_mirrored(topic, d.send(topic, "before-stop"), "records produced before the stop")
    mark = d.c.journal_cursor()

    began = time.monotonic()
    d.systemctl("stop")
    took = time.monotonic() - began
    state = unit_state(d.c, "mirrord")
    journal = d.c.journal("mirrord", after=mark)
    assert (state["ActiveState"], state["Result"]) == ("inactive", "success"), state
    assert took < 90, f"stop took {took:.0f}s (TimeoutStopSec=90)"
    # What kafka-consumer-groups shows after a clean stop: the group is at the end of every partition.
    assert d.committed(topic) == end_offsets(d.source, topic), "mirrored records left uncommitted at stop"
    # The graceful path ran to its end, and systemd had nothing to report: no failed exit,
    # no timeout, no process left behind for SIGKILL (the Spark JVM must be gone with its main process).
    assert "stopped after mirroring" in journal, journal[-4000:]
    for unclean in ("Main process exited", "timed out", "SIGKILL"):
        assert unclean not in journal, f"{unclean!r} on stop:\n{journal[-4000:]}"


def test_template_instance_runs_its_own_flow_with_its_environment_file(deployment):
    d = deployment
    unit, topic = "mirrord@second.service", d.topic("c-1")
    create_topic(d.source, topic, 2)
    second = write_flow(d.config.parent / "second", d.source, d.target, "nothing-matches-this",
                        group=f"{d.prefix}-second", conf={"state.dir": "/var/lib/mirrord"}).parent
    install_config(d.c, "/etc/mirrord/second", flow_files(second))
    # The operator's per-instance overrides: /etc/default/mirrord-NAME beats mirrord.conf.
    d.c.write_file("/etc/default/mirrord-second", f"MIRRORD_WHITELIST={d.prefix}-c-.*\n")
    keys = d.send(topic, "second")
    try:
        d.systemctl("start", unit=unit)
        d.wait_mirrored(topic, keys, "records of the instance's flow")
        assert d.c.run("test", "-d", "/var/lib/mirrord/second/checkpoint", check=False).returncode == 0, \
            d.c.run("find", "/var/lib/mirrord", "-maxdepth", "2").stdout
    finally:
        d.c.run("systemctl", "stop", unit, timeout=150)


def test_configuration_error_leaves_the_unit_failed_without_a_restart_loop(deployment):
    d = deployment
    unit = "mirrord@broken.service"
    broken = flow_files(d.config)
    broken["mirrord.conf"] = broken["mirrord.conf"].replace("num.streams = 2", "num.streams = many")
    install_config(d.c, "/etc/mirrord/broken", broken)
    # Restart quickly if it restarted at all, so a loop would show within the wait below.
    d.c.write_file(f"/etc/systemd/system/{unit}.d/50-fast-restart.conf", "[Service]\nRestartSec=1\n")
    d.c.run("systemctl", "daemon-reload")

    start = d.c.run("systemctl", "start", unit, check=False, timeout=START_TIMEOUT)
    assert start.returncode != 0, "start of a misconfigured instance reported success"
    wait_until(lambda: unit_state(d.c, unit)["ActiveState"] == "failed", 30, f"{unit} to fail")
    time.sleep(3)  # three RestartSec periods: a restart loop would have begun
    state = unit_state(d.c, unit)
    assert (state["ActiveState"], state["Result"], state["ExecMainStatus"]) == ("failed", "exit-code", "78"), state
    assert state["NRestarts"] == "0", state
    journal = d.c.journal(unit)
    assert "/etc/mirrord/broken/mirrord.conf" in journal and "num.streams" in journal, journal[-3000:]
