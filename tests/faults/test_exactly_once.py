"""Exactly once (`delivery = exactly-once`, docs/decisions.md §12): kill -9 of the whole process tree, or of Spark's
JVM alone, at random moments of a live stream, in both trigger modes; a read_committed reader of the target then finds
every source record exactly once, in order, with every field."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import time

import pytest

from mirrord.kafka.admin import Cluster, TopicReader
from tests.harness.mirrord import Mirrord, metric_value, write_flow
from tests.harness.records import Trickle, count, create_topic, read_all, read_committed, wait_until
from tests.integration.test_resilience import wait_all_mirrored

# Per trigger mode. make test runs 2 (and 4 more at named points, below: each state a transaction can be killed
# in); MIRRORD_EOS_KILLS=10 is the campaign of docs/decisions.md §12 (20 kills at random moments).
KILLS = int(os.environ.get("MIRRORD_EOS_KILLS", "2"))
RATE = 1000


def assert_exactly_once(source: str, target: str, topic: str) -> int:
    """The target, read read_committed, holds each source partition's records once each, in order; returns
    how many records that is."""
    src, dst = read_all(source, topic), read_committed(target, topic)
    for p, records in src.items():
        got, want = [r.fields() for r in dst[p]], [r.fields() for r in records]
        duplicates = len(got) - len(set(got))
        missing = len(set(want) - set(got))
        assert (duplicates, missing) == (0, 0), f"partition {p}: {duplicates} duplicates, {missing} missing"
        assert got == want, f"partition {p}: records reordered"
    return sum(len(r) for r in src.values())


POINTS = ("open", "commit", "boundary", "init")  # io.mirrord.log.HoldPoint


@pytest.mark.parametrize("trigger", ["real-time", "micro-batch"])
def test_kill_9_at_random_moments_and_at_each_named_point_copies_every_record_exactly_once(
        kafka_pair, unique, tmp_path, trigger):
    """One live stream, kill -9 at random moments (of the whole tree, or every other time of Spark's JVM alone),
    then at each named point of a transaction: with one open, with its commit about to be asked for, at a batch's
    end before its last commit, and right after a new owner's initTransactions (the JVM holds there:
    MIRRORD_TEST_HOLD_AT). A read_committed reader of the target then finds every record once, in order."""
    source, target = kafka_pair
    topic, group = unique("eos"), unique("eos-group")
    create_topic(source.bootstrap, topic, 4)
    config = write_flow(tmp_path, source.bootstrap, target.bootstrap, topic, group=group,
                        conf={"leader.election.enabled": "false", "delivery": "exactly-once", "trigger": trigger})
    rng = random.Random(20261126)
    trickle = Trickle(source.bootstrap, topic, 4, total=900 * RATE, rate=RATE).start()
    daemon = Mirrord(config)
    try:
        for kill in range(KILLS):
            daemon.start()
            daemon.wait_ready()
            floor = count(target.bootstrap, topic)
            wait_until(lambda floor=floor: count(target.bootstrap, topic) > floor, 180, "this run copying")
            time.sleep(rng.uniform(0.0, 3.0))  # a random moment of the stream is the point of this test
            if kill % 2:  # every other kill as the kernel's out-of-memory killer's: the JVM alone, mirrord exits 1
                assert daemon.kill_jvm() == 1, daemon.output()[-3000:]
            else:
                daemon.kill9()
            assert trickle.is_alive(), "the stream ended before this kill"
        for point in POINTS:
            daemon = Mirrord(config, env={"MIRRORD_TEST_HOLD_AT": point}).start()
            daemon.wait_logged(f"mirrord test hold: {point}", 180)
            daemon.kill9()
        daemon = Mirrord(config).start()
        daemon.wait_ready()
        floor = count(target.bootstrap, topic)
        wait_until(lambda: count(target.bootstrap, topic) > floor + RATE, 180, "the last run copying")
        trickle.stop()
        assert not trickle.errors, trickle.errors[:3]
        wait_all_mirrored(source.bootstrap, topic, group, timeout=300)
        copied = assert_exactly_once(source.bootstrap, target.bootstrap, topic)
        print(f"exactly once, {trigger}: kill -9 x{KILLS} at random moments and at {', '.join(POINTS)}: {copied} "
              "records, 0 duplicates, 0 missing")
        metrics = daemon.metrics()
        assert metric_value(metrics, "mirrord_delivery", delivery="exactly-once") == 1
        assert metric_value(metrics, "mirrord_transactions_total", outcome="committed") > 0
        assert daemon.stop() == 0
    finally:
        trickle.stop()
        daemon.stop()


def test_a_host_frozen_mid_transaction_is_fenced_by_the_broker_when_the_layout_changed(kafka_pair, unique, tmp_path):
    """Two hosts of one flow without leader election (as a Spark executor the driver's lease cannot reach would
    be): the first, with 2 streams, frozen whole with transactions open; the second, with 1 stream (other
    transactional ids but the first), copies and stops; the first woken. The second's start fenced every id of
    the flow the target knew, so the first's open transactions cannot commit: its error is named, it restarts
    from what the second committed, and read_committed readers see each record once."""
    source, target = kafka_pair
    topic, group = unique("zombie"), unique("zombie-group")
    create_topic(source.bootstrap, topic, 4)
    conf = {"leader.election.enabled": "false", "delivery": "exactly-once"}
    producer = {"transaction.timeout.ms": "120000"}  # the broker must not abort the frozen transactions itself
    first = Mirrord(write_flow(tmp_path / "host-a", source.bootstrap, target.bootstrap, topic, group=group,
                               conf={**conf, "num.streams": "2"}, producer=producer))
    second = Mirrord(write_flow(tmp_path / "host-b", source.bootstrap, target.bootstrap, topic, group=group,
                                conf={**conf, "num.streams": "1"}, producer=producer))
    trickle = Trickle(source.bootstrap, topic, 4, total=900 * RATE, rate=RATE).start()
    frozen: list[int] = []
    try:
        first.start().wait_ready()
        floor = count(target.bootstrap, topic)
        wait_until(lambda: count(target.bootstrap, topic) > floor + RATE, 120, "the first host copying")
        frozen = [first.process.pid, first.jvm_pid()]
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        second.start().wait_ready()
        second.wait_logged("fenced the earlier producers of this flow on the target: mirrord.test.", 30)
        ids = re.search(r"fenced the earlier producers of this flow on the target: (.*)", second.output()).group(1)
        one = r"mirrord\.test\.[\w-]{22}\.[0-9a-f]{10}-"  # flow, source cluster, group.id's hash, stream
        assert re.fullmatch(f"{one}0, {one}1", ids), ids
        floor = count(target.bootstrap, topic)
        wait_until(lambda: count(target.bootstrap, topic) > floor + RATE, 120, "the second host copying")
        assert second.stop() == 0
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        fenced = "was fenced: a newer owner of this stream"
        first.wait_logged(fenced, 60)
        woken = first.output().index(fenced)
        wait_until(lambda: "-> mirroring" in first.output()[woken:], 120, "the woken host mirroring again")
        floor = count(target.bootstrap, topic)
        wait_until(lambda: count(target.bootstrap, topic) > floor + RATE, 120, "the woken host copying again")
        trickle.stop()
        wait_all_mirrored(source.bootstrap, topic, group, timeout=300)
        copied = assert_exactly_once(source.bootstrap, target.bootstrap, topic)
        print(f"a host frozen mid-transaction, fenced by the broker: {copied} records, 0 duplicates, 0 missing")
        # the offset syncs, written in the transactions, read to their end past the markers (translation's reader)
        syncs = TopicReader(Cluster("target", {"bootstrap.servers": target.bootstrap}),
                            "mm2-offset-syncs.source.internal")
        assert syncs.read_to_end(lambda _sync: None) > 0
        syncs.close()
        assert first.stop() == 0
    finally:
        trickle.stop()
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(pid, signal.SIGCONT)
        first.stop()
        second.stop()
