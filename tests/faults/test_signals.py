"""Signals at any moment: SIGTERM or SIGINT to mirrord, or to its whole process group (as a terminal's
Ctrl-C or `kill -- -PGID` sends them), while Spark starts, mid-stream and during the stop: exit 0,
nothing lost, and nothing copied twice, since the query stops between batches. Reloads likewise."""

from __future__ import annotations

import os
import signal

import pytest

from tests.faults.test_exactly_once import assert_exactly_once
from tests.harness.mirrord import Mirrord, descendants, wait_gone, write_flow
from tests.harness.records import Trickle, count, create_topic, wait_until
from tests.integration.test_resilience import assert_nothing_lost, wait_all_mirrored


def assert_clean_exit(daemon: Mirrord, tree: list[int]) -> None:
    assert daemon.process.wait(90) == 0, daemon.output()[-3000:]
    assert "Traceback" not in daemon.output(), daemon.output()[-3000:]
    errors = [line for line in daemon.output().splitlines() if " ERROR " in line]
    assert not errors, errors[:3]  # a clean stop's journal has no ERROR line (Kafka's, Spark's or mirrord's)
    wait_gone(tree)  # Spark's JVM too, by itself


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_process_group_while_spark_starts_exits_0(kafka_pair, unique, tmp_path, sig):
    source, target = kafka_pair
    topic = unique("starting")
    create_topic(source.bootstrap, topic, 1)
    daemon = Mirrord(write_flow(tmp_path, source.bootstrap, target.bootstrap, topic, group=unique("g"))).start()
    try:
        daemon.wait_logged("starting Spark")
        wait_until(lambda: daemon.jvm_pid() is not None, 60, "Spark's JVM to be launched")
        tree = descendants(daemon.process.pid)
        os.killpg(daemon.process.pid, sig)
        assert_clean_exit(daemon, tree)
    finally:
        daemon.stop()


@pytest.mark.parametrize("trigger,delivery", [("real-time", "at-least-once"), ("micro-batch", "at-least-once"),
                                              ("real-time", "exactly-once")])
def test_signals_to_the_process_group_mid_stream_and_during_the_stop_exit_0_and_copy_nothing_twice(
        kafka_pair, unique, tmp_path, trigger, delivery):
    """Exactly once, the stop interrupts the streams' open transactions: they abort, and are copied again once
    (read_committed, the target holds each record once)."""
    source, target = kafka_pair
    topic, group = unique("midstream"), unique("midstream-group")
    create_topic(source.bootstrap, topic, 2)
    config = write_flow(tmp_path, source.bootstrap, target.bootstrap, topic, group=group,
                        conf={"offset.commit.interval.ms": "100", "trigger": trigger, "delivery": delivery})
    daemon = Mirrord(config).start()
    trickle = Trickle(source.bootstrap, topic, 2, total=40_000, rate=2000)
    try:
        daemon.wait_ready()
        trickle.start()
        wait_until(lambda: count(target.bootstrap, topic) >= 3000, 120, "a stream under way")
        tree = descendants(daemon.process.pid)
        os.killpg(daemon.process.pid, signal.SIGTERM)  # mid-batch, most likely: batches run back to back
        wait_until(lambda: "stopping:" in daemon.output() or not daemon.alive(), 30, "the stop to begin")
        os.killpg(daemon.process.pid, signal.SIGINT)  # impatient: again, during the stop
        assert_clean_exit(daemon, tree)
        assert f"{trigger} mode" in daemon.output(), daemon.output()[-3000:]
        assert "streaming query stopped cleanly" in daemon.output(), daemon.output()[-3000:]

        daemon = Mirrord(config).start()
        trickle.join(120)
        daemon.wait_ready()
        wait_all_mirrored(source.bootstrap, topic, group)
        if delivery == "exactly-once":
            assert_exactly_once(source.bootstrap, target.bootstrap, topic)
        else:
            assert assert_nothing_lost(source.bootstrap, target.bootstrap, topic) == 0, "records copied twice"
        daemon.signal(signal.SIGINT)
        assert_clean_exit(daemon, [])
    finally:
        trickle.stop()
        daemon.stop()


@pytest.mark.parametrize("trigger", ["real-time", "micro-batch"])
def test_reloads_mid_stream_copy_nothing_twice_and_refuse_what_cannot_change(kafka_pair, unique, tmp_path, trigger):
    source, target = kafka_pair
    topic, other, group = unique("reload"), unique("reload-other"), unique("reload-group")
    create_topic(source.bootstrap, topic, 2)
    create_topic(source.bootstrap, other, 1)
    # A stream under way while the reloads arrive: a reload that cut records in flight would show.
    # (long enough for four reloads on a slow machine; stopped once they are done)
    trickle = Trickle(source.bootstrap, topic, 2, total=600_000, rate=3000)
    config = write_flow(tmp_path, source.bootstrap, target.bootstrap, topic, group=group,
                        conf={"trigger": trigger})
    daemon = Mirrord(config).start()

    def reload(old: str, new: str, expect: str) -> None:
        config.write_text(config.read_text().replace(old, new))
        before = daemon.output().count(expect)
        daemon.signal(signal.SIGHUP)
        wait_until(lambda: daemon.output().count(expect) > before or not daemon.alive(), 60, f"{expect!r}")
        assert daemon.alive(), daemon.output()[-3000:]

    try:
        daemon.wait_ready()
        trickle.start()
        wait_until(lambda: count(target.bootstrap, topic) >= 6000, 120, "the stream under way")
        reload("num.streams = 2", "num.streams = 2\nsync.group.offsets.interval.seconds = 5",
               "reloaded: topics matching")
        reloaded = [line for line in daemon.output().splitlines() if "reloaded: topics matching" in line]
        assert reloaded[-1].endswith("(query unchanged)"), reloaded
        for whitelist in (f"{topic}|{other}", topic, f"{topic}|{other}"):  # each restarts the query
            current = next(line for line in config.read_text().splitlines() if line.startswith("whitelist"))
            reload(current, f"whitelist = {whitelist}", "reloaded: topics matching")
        reload("flow = test", "flow = renamed", "reload refused")
        refusal = next(line for line in daemon.output().splitlines() if "reload refused" in line)
        assert "flow cannot change while mirrord runs" in refusal, refusal
        assert trickle.is_alive(), "the stream ended before the reloads: nothing to cut"
        trickle.stop()
        assert not trickle.errors, trickle.errors[:3]
        wait_all_mirrored(source.bootstrap, topic, group)
        assert daemon.output().count("streaming query stopped cleanly") == 3, daemon.output()[-3000:]
        assert assert_nothing_lost(source.bootstrap, target.bootstrap, topic) == 0, "a reload copied records twice"
        assert daemon.stop() == 0
    finally:
        trickle.stop()
        daemon.stop()
