"""Crashes, stops and outages: at-least-once means every source record ends up in the target."""

from __future__ import annotations

import time

from tests.harness.kafka import KafkaBroker
from tests.harness.mirrord import Mirrord, metric_value, write_flow
from tests.harness.records import Trickle, count, create_topic, read_all, wait_until


def assert_nothing_lost(source: str, target: str, topic: str) -> int:
    """Every source record is in the target, in source order per partition; returns the duplicates."""
    src, dst = read_all(source, topic), read_all(target, topic)
    duplicates = 0
    for p, records in src.items():
        seen, deduplicated = set(), []
        for r in dst[p]:
            if r.fields() in seen:
                duplicates += 1
            else:
                seen.add(r.fields())
                deduplicated.append(r.fields())
        assert deduplicated == [r.fields() for r in records], f"partition {p}: records lost or reordered"
    return duplicates


def test_kill_9_mid_stream_then_restart_loses_nothing(kafka_pair, unique, tmp_path):
    source, target = kafka_pair
    topic = unique("crash")
    create_topic(source.bootstrap, topic, 3)
    trickle = Trickle(source.bootstrap, topic, 3, total=3000, rate=150).start()
    config = write_flow(tmp_path, source.bootstrap, target.bootstrap, topic, group=unique("crash-group"))
    daemon = Mirrord(config).start()
    try:
        daemon.wait_ready()
        wait_until(lambda: count(target.bootstrap, topic) >= 300, 120, "some records mirrored")
        daemon.kill9()  # at an arbitrary point of a batch, as a power cut or the OOM killer would
        restarted = Mirrord(config).start()
        trickle.join()
        restarted.wait_ready()
        wait_until(lambda: count(target.bootstrap, topic) >= 3000, 180, "all records mirrored after restart")
        duplicates = assert_nothing_lost(source.bootstrap, target.bootstrap, topic)
        print(f"kill -9: {duplicates} duplicates of 3000 records")
        assert restarted.stop() == 0
    finally:
        trickle.stop()
        daemon.stop()


def test_sigterm_stops_cleanly_with_exit_0_and_loses_nothing(kafka_pair, unique, tmp_path):
    source, target = kafka_pair
    topic = unique("term")
    create_topic(source.bootstrap, topic, 2)
    trickle = Trickle(source.bootstrap, topic, 2, total=3000, rate=100).start()
    config = write_flow(tmp_path, source.bootstrap, target.bootstrap, topic, group=unique("term-group"))
    daemon = Mirrord(config).start()
    try:
        daemon.wait_ready()
        wait_until(lambda: count(target.bootstrap, topic) >= 200, 120, "some records mirrored")
        assert daemon.stop() == 0
        assert "stopped after mirroring" in daemon.output()
        mirrored_at_stop = count(target.bootstrap, topic)
        trickle.join()
        restarted = Mirrord(config).start()
        restarted.wait_ready()
        wait_until(lambda: count(target.bootstrap, topic) >= 3000, 120, "all records mirrored after restart")
        duplicates = assert_nothing_lost(source.bootstrap, target.bootstrap, topic)
        print(f"SIGTERM: {duplicates} duplicates; {mirrored_at_stop} records mirrored before the stop")
        assert restarted.stop() == 0
    finally:
        trickle.stop()
        daemon.stop()


def test_target_down_for_30_seconds_loses_nothing(kafka_pair, unique, tmp_path):
    source, _ = kafka_pair
    target = KafkaBroker("outage-target", tmp_path / "target").start()  # its own: this test stops it
    topic = unique("outage")
    create_topic(source.bootstrap, topic, 2)
    trickle = Trickle(source.bootstrap, topic, 2, total=3000, rate=60).start()
    config = write_flow(tmp_path / "flow", source.bootstrap, target.bootstrap, topic, group=unique("outage-group"))
    daemon = Mirrord(config).start()
    try:
        daemon.wait_ready()
        wait_until(lambda: count(target.bootstrap, topic) >= 200, 120, "some records mirrored")
        target.stop()
        down_since = time.monotonic()
        lags = []
        while time.monotonic() - down_since < 30:
            if not daemon.alive():
                break
            lags.append(metric_value(daemon.metrics(), "mirrord_lag_records") or 0)
            time.sleep(1)
        if daemon.alive():  # the lag an operator watches keeps rising while nothing can be written
            assert lags[-1] > lags[0] + 500, lags
        target.start()
        if not daemon.alive():  # allowed: exit non-zero and be restarted, as systemd would
            assert daemon.process.returncode != 0
            daemon = Mirrord(config).start()
            daemon.wait_ready()
        trickle.join(240)
        wait_until(lambda: count(target.bootstrap, topic) >= 3000, 180, "all records mirrored after the outage")
        duplicates = assert_nothing_lost(source.bootstrap, target.bootstrap, topic)
        print(f"target outage: {duplicates} duplicates")
        assert daemon.stop() == 0
    finally:
        trickle.stop()
        daemon.stop()
        target.destroy()
