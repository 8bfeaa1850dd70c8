"""One flow on several hosts (docs/decisions.md §6): exactly one mirrors, elected by a consumer group on
the target; when it dies a standby takes over from the offsets it committed, without a double copy."""

from __future__ import annotations

import contextlib
import os
import signal
import time

from tests.harness.mirrord import Mirrord, metric_value, write_flow
from tests.harness.records import Trickle, count, create_topic, read_all, wait_until
from tests.integration.test_resilience import assert_nothing_lost, wait_all_mirrored

SESSION_S = 6
# Past the session, to the new host's first copy: the election's rebalance and the query's start. Measured alone:
# 6.3 s in all with the standby's rehearsal (issue 31: 15.8 s before it), 9.0-9.4 s with the rehearsal disabled; 9.06 s
# once with it under make test's load, past a bound of 3 s. The bound catches a take-over that waits a second session
# or a cold start's worth more; the rehearsal itself is asserted by its journal line, its gain is not timed here.
TAKE_OVER_S = 5
BATCH = 2000  # max.offsets.per.trigger: what one batch in flight can copy twice
AFTER = 5  # seconds the stream goes on once the last hand-over is done, the new active host copying it


def test_two_hosts_of_one_flow_copy_once_and_a_standby_takes_over_when_the_active_one_is_killed(
        kafka_pair, unique, tmp_path):
    source, target = kafka_pair
    topic, group = unique("ha"), unique("ha-group")
    create_topic(source.bootstrap, topic, 2)
    conf = {"leader.session.timeout.ms": str(SESSION_S * 1000), "max.offsets.per.trigger": str(BATCH)}
    hosts = [Mirrord(write_flow(tmp_path / host, source.bootstrap, target.bootstrap, topic, group=group, conf=conf))
             for host in ("host-a", "host-b")]
    first, second = hosts
    trickle = Trickle(source.bootstrap, topic, 2, total=20_000, rate=500)
    try:
        first.start().wait_ready()
        second.start()
        second.wait_logged("standing by: another host mirrors flow test", 120)
        trickle.start()
        wait_until(lambda: count(target.bootstrap, topic) >= 4000, 120, "records flowing")
        assert "mirroring " not in second.output()
        second.wait_logged("standby: another host mirrors flow test of source cluster ", 30)  # its STATUS, every 10 s
        second.wait_logged("rehearsed the query's start", 120)  # once, while it stands by
        assert metric_value(first.metrics(), "mirrord_active") == 1
        assert metric_value(second.metrics(), "mirrord_active") == 0
        assert duplicates_so_far(source.bootstrap, target.bootstrap, topic) == 0, "both hosts copied"

        killed = time.monotonic()
        first.kill9()  # the active host dies mid-stream
        took = copying_again(target.bootstrap, topic, killed)
        print(f"standby copying {took:.1f}s after the active host was killed (session {SESSION_S}s)")
        # the session, the election's rebalance (a heartbeat, S/10), then the rehearsed query's start and first send
        assert took <= SESSION_S + TAKE_OVER_S, second.output()[-3000:]

        first.start()  # back as a standby; its checkpoint is now behind the group's offsets
        first.wait_logged("standing by", 120)
        assert second.stop() == 0  # leaves the group at once: the first host takes over
        first.wait_logged("resuming from group", SESSION_S + 60)
        end_stream(trickle, 500)
        wait_all_mirrored(source.bootstrap, topic, group)
        duplicates = assert_nothing_lost(source.bootstrap, target.bootstrap, topic)
        print(f"two hosts, one kill -9 and one hand-over: {duplicates} duplicates of {trickle.sent} records")
        # At the kill: the batch in flight, and the one before it if its group commit had not been made yet.
        assert duplicates <= 2 * BATCH, (f"more than the batches in flight were copied twice: "
                                    f"{twice(target.bootstrap, topic)}\n" + "\n".join(
                                        line for host in hosts for line in host.output().splitlines()
                                        if "mirrord" in line and "records mirrored" not in line))
        assert first.stop() == 0
    finally:
        trickle.stop()
        for host in hosts:
            host.stop()


def copying_again(target: str, topic: str, since: float) -> float:
    """Seconds from `since` (monotonic) to the first record the target gains from now on (the stream goes on)."""
    floor = count(target, topic)
    wait_until(lambda: count(target, topic) > floor, SESSION_S + 60, "a host copying again", interval=0.1)
    return time.monotonic() - since


def end_stream(trickle: Trickle, rate: int) -> None:
    """The stream (at most its 20 000 records, 40 s, as before) goes on AFTER seconds more, then ends; no record
    failed to reach the source."""
    going_on = trickle.sent + rate * AFTER
    wait_until(lambda: trickle.sent >= going_on or not trickle.is_alive(), AFTER + 60, "the stream going on")
    trickle.stop()
    assert not trickle.errors, trickle.errors[:3]


def duplicates_so_far(source: str, target: str, topic: str) -> int:
    """Duplicates in the target so far (keys are unique per record in a Trickle)."""
    keys = [r.key for records in read_all(target, topic).values() for r in records]
    return len(keys) - len(set(keys))


def twice(bootstrap: str, topic: str) -> str:
    """The runs of sequence numbers found twice, per partition: where a double copy began and ended."""
    runs = []
    for partition, records in sorted(read_all(bootstrap, topic).items()):
        seen, dup = set(), []
        for r in records:
            (dup.append if r.key in seen else seen.add)(r.key)
        seqs = sorted(int(k[1:]) for k in dup)
        if seqs:
            runs.append(f"p{partition}: {len(seqs)} from k{seqs[0]} to k{seqs[-1]}")
    return "; ".join(runs)


def test_an_active_host_whose_supervisor_freezes_is_fenced_before_a_standby_takes_over(kafka_pair, unique, tmp_path):
    """SIGSTOP of the active host's Python alone: its Spark JVM, a process of its own, could go on copying
    beside the standby that takes over. Its lease (half the session) lapses first: the JVM halts itself."""
    source, target = kafka_pair
    topic, group, hosts = two_hosts(kafka_pair, unique, tmp_path, "fence")
    first, second = hosts
    rate = 500
    trickle = Trickle(source.bootstrap, topic, 2, total=20_000, rate=rate)
    try:
        first.start().wait_ready()
        second.start()
        second.wait_logged("standing by: another host mirrors flow test", 120)
        trickle.start()
        wait_until(lambda: count(target.bootstrap, topic) >= 3000, 120, "records flowing")
        jvm = first.jvm_pid()
        first.signal(signal.SIGSTOP)  # the supervisor only: its JVM keeps running
        frozen = time.monotonic()
        try:
            wait_until(lambda: not _running(jvm), SESSION_S, "the frozen host's JVM fenced (halted)")
            fenced_after = time.monotonic() - frozen
            took = second.wait_logged("mirroring ", SESSION_S + 60)
        finally:
            first.signal(signal.SIGCONT)
        print(f"JVM fenced {fenced_after:.1f}s after its supervisor froze; standby mirroring {took:.1f}s after")
        assert fenced_after < SESSION_S / 2 + 1.5  # the lease: half the session, checked every 50 ms
        assert first.process.wait(60) == 75, first.output()[-3000:]  # EX_TEMPFAIL: systemd restarts it
        assert "fenced" in first.output()
        end_stream(trickle, rate)
        wait_all_mirrored(source.bootstrap, topic, group)
        duplicates = assert_nothing_lost(source.bootstrap, target.bootstrap, topic)
        print(f"supervisor frozen past the session: {duplicates} duplicates of {trickle.sent} records")
        # The JVM commits the positions itself every 250 ms (docs/decisions.md §10), frozen supervisor or not:
        # what it copied after its last commit before it halted, at most a second of the stream.
        assert duplicates <= rate * 1, twice(target.bootstrap, topic)
        assert second.stop() == 0
    finally:
        trickle.stop()
        for host in hosts:
            with contextlib.suppress(ProcessLookupError):
                host.signal(signal.SIGCONT)
            host.stop()


def test_a_whole_active_host_frozen_past_the_session_is_fenced_when_it_wakes(kafka_pair, unique, tmp_path):
    """SIGSTOP of the active host's Python and JVM together (a paused VM, a host deep in swap) past the
    session, then SIGCONT once the standby mirrors: the woken host's lease has lapsed and cannot be renewed,
    so its JVM halts with what its producers buffered and its supervisor exits 75, as a fenced host."""
    source, target = kafka_pair
    topic, group, hosts = two_hosts(kafka_pair, unique, tmp_path, "frozen")
    first, second = hosts
    rate = 500
    trickle = Trickle(source.bootstrap, topic, 2, total=20_000, rate=rate)
    frozen: list[int] = []
    try:
        first.start().wait_ready()
        second.start()
        second.wait_logged("standing by: another host mirrors flow test", 120)
        trickle.start()
        wait_until(lambda: count(target.bootstrap, topic) >= 3000, 120, "records flowing")
        second.wait_logged("rehearsed the query's start", 120)
        frozen = [first.process.pid, first.jvm_pid()]
        stopped = time.monotonic()
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        second.wait_logged("mirroring ", SESSION_S + 60)  # what the frozen host had in flight has long landed
        took = copying_again(target.bootstrap, topic, stopped)
        at_takeover = count(target.bootstrap, topic)
        wait_until(lambda: count(target.bootstrap, topic) >= at_takeover + rate, 60, "the new host copying")
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        print(f"whole host frozen: standby copying {took:.1f}s after (session {SESSION_S}s)")
        assert took <= SESSION_S + TAKE_OVER_S, second.output()[-3000:]  # the session, then the query's start
        assert first.process.wait(60) == 75, first.output()[-3000:]  # fenced: EX_TEMPFAIL, systemd restarts it
        assert "fenced" in first.output()
        end_stream(trickle, rate)
        wait_all_mirrored(source.bootstrap, topic, group)
        duplicates = assert_nothing_lost(source.bootstrap, target.bootstrap, topic)
        print(f"whole host frozen past the session and woken: {duplicates} duplicates of {trickle.sent} records")
        # What the host had sent but not yet committed to the group when it froze (acknowledgements are
        # committed every half second): about a second of the stream. Nothing after the wake-up.
        assert duplicates <= rate * 2, twice(target.bootstrap, topic)
        assert second.stop() == 0
    finally:
        trickle.stop()
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(pid, signal.SIGCONT)
        for host in hosts:
            host.stop()


def two_hosts(kafka_pair, unique, tmp_path, name: str) -> tuple[str, str, list[Mirrord]]:
    """A fresh two-partition topic, its group, and two hosts of one flow with a SESSION_S session (not started)."""
    source, target = kafka_pair
    topic, group = unique(name), unique(f"{name}-group")
    create_topic(source.bootstrap, topic, 2)
    conf = {"leader.session.timeout.ms": str(SESSION_S * 1000)}
    return topic, group, [Mirrord(write_flow(tmp_path / host, source.bootstrap, target.bootstrap, topic, group=group,
                                             conf=conf)) for host in ("host-a", "host-b")]


def _running(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False
