"""The fence's rules on an injected clock, without brokers or Spark (docs/decisions.md §6): the lease is granted
only from the election's confirmations and never past half the session after the last one, outages included;
the producer's timeouts keep what was sent under it inside the session; losing it leaves the election."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from mirrord.errors import EX_CONFIG, ConfigError, Fenced, MirrordError
from mirrord.fencing import (
    FENCED,
    HELD,
    LAPSED,
    OFF,
    Clock,
    Confirmations,
    Election,
    Lease,
    Stamp,
    Timing,
    bound_producer,
    lease_ms,
)

SESSION = 10_000


class FakeClock(Clock):
    """`run` moves both clocks (time passing, a frozen process); `suspend` only the wall clock (a suspended VM,
    whose monotonic clock did not count it: CLOCK_BOOTTIME would, the test takes the worst case)."""

    def __init__(self):
        self.boot, self.wall = 1000.0, 1_800_000_000.0

    def stamp(self) -> Stamp:
        return Stamp(self.boot, self.wall)

    def run(self, seconds: float) -> None:
        self.boot += seconds
        self.wall += seconds

    def suspend(self, seconds: float) -> None:
        self.wall += seconds


class FakeJvm:
    """io.mirrord.fencing.Fence as the lease sees it: grants and pulses recorded, its state set by the test."""

    def __init__(self):
        self.grants: list[tuple[int, int]] = []
        self.state = OFF
        self.exited = False
        self.flying = 0
        self.calls: list[str] = []
        self.quarantine = None

    def configure(self, quarantine_ms):
        self.quarantine = quarantine_ms

    def grant(self, valid_for_ms, wall_deadline_ms):
        self._alive()
        if self.state == FENCED:
            return False
        self.grants.append((valid_for_ms, wall_deadline_ms))
        self.state = HELD
        return True

    def pulse(self):
        self._alive()
        return self.state

    def release(self):
        self._alive()
        self.calls.append("release")
        if self.state != FENCED:
            self.state = OFF

    def revoke(self):
        self._alive()
        self.calls.append("revoke")
        if self.state in (HELD, LAPSED):
            self.state = FENCED
            self.exited = True  # Runtime.halt(75)

    def in_flight(self):
        self._alive()
        return self.flying

    def gone(self, wait=0.0):
        return self.exited

    def _alive(self):
        if self.exited:
            raise ConnectionRefusedError("py4j: the JVM is gone")


class FakeLeadership:
    def __init__(self):
        self.active = True
        self.closed = False
        self.group = "g.leader"

    def is_active(self):
        return self.active

    def close(self):
        self.closed = True
        self.active = False


def election(clock: FakeClock, active: bool = True) -> Election:
    settings = SimpleNamespace(leader_election=True, leader_session_timeout_ms=SESSION, group_id="g")
    e = Election(settings, target=None, clock=clock)
    e.leadership = FakeLeadership()
    e.leadership.active = active
    return e


def confirm(e: Election, clock: FakeClock, rtt: float = 0.01) -> Stamp:
    """A commit the coordinator accepted: its start is the confirmation."""
    commit = e.confirmations.begin()
    began = clock.stamp()
    clock.run(rtt)
    e.confirmations.done(commit, True)
    return began


# -- timing ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("session", [6000, 10_000, 45_000])
def test_the_lease_is_half_the_session_and_what_a_record_may_take_after_it_ends_a_guard_before_the_session(session):
    t = Timing(session)
    assert t.lease_ms == lease_ms(session) == session // 2
    assert t.lease_ms + t.block_ms + t.delivery_ms + t.guard_ms == session
    assert t.guard_ms > 0 and t.delivery_ms > 0
    assert t.quarantine_ms == t.block_ms + t.delivery_ms
    assert t.confirm_every_ms < t.lease_ms and t.heartbeat_ms < t.lease_ms


# -- the producer's timeouts --------------------------------------------------------------------------------------
def producer(**properties: str):
    path = Path("/etc/mirrord/producer.properties")
    return SimpleNamespace(path=path, properties=properties,
                           error=lambda key, reason: ConfigError(path, key, reason))


SINK = {"kafka.bootstrap.servers": "t:9092", "kafka.linger.ms": "5", "kafka.delivery.timeout.ms": "2147483647",
        "kafka.max.block.ms": "9223372036854775807"}


def test_the_producers_timeouts_are_bounded_by_the_lease_and_keep_kafkas_rule():
    out = bound_producer(SINK, producer(), SESSION)
    t = Timing(SESSION)
    assert out["kafka.delivery.timeout.ms"] == str(t.delivery_ms) == "3000"
    assert out["kafka.request.timeout.ms"] == "2995"  # delivery.timeout.ms >= linger.ms + request.timeout.ms
    assert out["kafka.max.block.ms"] == str(t.block_ms) == "1000"
    assert out["kafka.bootstrap.servers"] == "t:9092"
    for linger in range(0, 1501, 100):  # Kafka's rule, whatever linger.ms the file sets
        out = bound_producer({**SINK, "kafka.linger.ms": str(linger)}, producer(**{"linger.ms": str(linger)}), SESSION)
        assert int(out["kafka.delivery.timeout.ms"]) >= linger + int(out["kafka.request.timeout.ms"])


def test_larger_timeouts_in_producer_properties_are_lowered_with_a_line_naming_the_file_and_key(caplog):
    caplog.set_level(logging.WARNING, "mirrord.fencing")
    given = {"delivery.timeout.ms": "120000", "request.timeout.ms": "1000", "max.block.ms": "60000"}
    out = bound_producer({**SINK, **{f"kafka.{k}": v for k, v in given.items()}}, producer(**given), SESSION)
    assert out["kafka.delivery.timeout.ms"] == "3000"
    assert out["kafka.request.timeout.ms"] == "1000"  # smaller: the file's
    assert out["kafka.max.block.ms"] == "1000"
    lines = [r.getMessage() for r in caplog.records]
    assert any("producer.properties: delivery.timeout.ms = 120000 lowered to 3000" in line for line in lines), lines
    assert any("producer.properties: max.block.ms = 60000 lowered to 1000" in line for line in lines), lines
    assert not any("request.timeout.ms" in line for line in lines)
    # a shorter delivery.timeout.ms of the file's is kept, and request.timeout.ms follows it
    out = bound_producer(SINK, producer(**{"delivery.timeout.ms": "2000"}), SESSION)
    assert (out["kafka.delivery.timeout.ms"], out["kafka.request.timeout.ms"]) == ("2000", "1995")


def test_a_linger_that_leaves_no_time_to_deliver_within_the_lease_is_a_config_error_naming_the_file_and_key():
    with pytest.raises(ConfigError) as refused:
        bound_producer(SINK, producer(**{"linger.ms": "2000"}), SESSION)
    assert refused.value.exit_status == EX_CONFIG
    assert str(refused.value).startswith("/etc/mirrord/producer.properties: linger.ms: 2000 leaves less than half")
    with pytest.raises(ConfigError, match="max.block.ms: must be a whole number"):
        bound_producer(SINK, producer(**{"max.block.ms": "soon"}), SESSION)


# -- confirmations ---------------------------------------------------------------------------------------------------
def test_a_confirmation_is_the_start_of_the_last_commit_the_coordinator_accepted():
    clock = FakeClock()
    c = Confirmations(clock)
    assert c.last() is None and c.remaining_ms(5000) == 0
    first = c.begin()
    began = clock.stamp()
    clock.run(2)  # the answer comes late: the lease counts from the start, not the answer
    c.done(first, True)
    assert c.last() == began
    assert c.remaining_ms(5000) == pytest.approx(3000)
    refused = c.begin()
    clock.run(0.1)
    c.done(refused, False)  # not a member of the current generation, no coordinator: nothing confirmed
    assert c.last() == began
    stale = c.begin()
    c.forget()  # the assignment was lost meanwhile: an answer to a commit begun before does not count
    c.done(stale, True)
    assert c.last() is None


def test_a_suspension_the_monotonic_clock_did_not_count_ends_what_is_left_of_the_lease():
    clock = FakeClock()
    c = Confirmations(clock)
    commit = c.begin()
    c.done(commit, True)
    clock.suspend(30)
    assert c.remaining_ms(5000) < 0


def test_commits_go_out_every_tenth_of_the_session_one_at_a_time_unless_one_goes_unanswered():
    clock = FakeClock()
    c = Confirmations(clock)
    t = Timing(SESSION)
    assert c.due(t.confirm_every_ms, t.lease_ms)
    pending = c.begin()
    clock.run(t.confirm_every_ms / 1000)
    assert not c.due(t.confirm_every_ms, t.lease_ms)  # the last one still pending
    clock.run(t.lease_ms / 1000)
    assert c.due(t.confirm_every_ms, t.lease_ms)  # unanswered for a lease: another
    c.done(pending, True)


# -- the lease ---------------------------------------------------------------------------------------------------
def test_the_lease_is_granted_only_while_elected_and_never_past_half_the_session_after_the_last_confirmation():
    clock, jvm = FakeClock(), FakeJvm()
    e = election(clock)
    lease = Lease(None, e, jvm=jvm, start=False)
    assert jvm.quarantine == Timing(SESSION).quarantine_ms
    with pytest.raises(MirrordError, match="not confirmed"):
        lease.hold()  # elected, but nothing confirmed yet
    c = confirm(e, clock)
    lease.hold()
    valid_for, deadline = jvm.grants[-1]
    assert 4980 <= valid_for <= 4990 and deadline == int(c.wall * 1000) + 5000  # what is left of c + 5 s
    # an outage, a partition: no more confirmations; every turn grants up to c + 5 s, never past it
    for _ in range(40):
        clock.run(0.25)
        lease.tick()
    assert all(int(c.wall * 1000) + 5000 == deadline for _, deadline in jvm.grants)
    assert clock.age(c) > 5 and jvm.grants[-1][0] < 250  # the last grant ended by c + 5 s
    jvm.state = LAPSED  # what the JVM finds when that time came
    assert lease.tick() == LAPSED
    # elected and confirmed again: granted again from the new confirmation
    c2 = confirm(e, clock)
    lease.tick()
    assert jvm.grants[-1][1] == int(c2.wall * 1000) + 5000
    # not elected (the session was lost, or the partition given up): nothing granted, whatever was confirmed
    e.leadership.active = False
    grants = len(jvm.grants)
    clock.run(0.25)
    lease.tick()
    assert len(jvm.grants) == grants


def test_after_a_lapse_the_next_lease_is_not_before_the_quarantine_and_the_lease_says_how_long_that_is():
    clock, jvm = FakeClock(), FakeJvm()
    e = election(clock)
    lease = Lease(None, e, jvm=jvm, start=False)
    assert lease.quarantined_for() == 0.0  # no lease yet: nothing to wait for
    confirm(e, clock)
    lease.hold()
    quarantine = Timing(SESSION).quarantine_ms / 1000
    clock.run(5.0)  # the lease (5 s from the confirmation) ran out: its quarantine began at its end
    assert lease.quarantined_for() == pytest.approx(quarantine, abs=0.02)
    clock.run(1.0)
    assert lease.quarantined_for() == pytest.approx(quarantine - 1.0, abs=0.02)
    clock.suspend(quarantine)  # whichever clock says more
    assert lease.quarantined_for() == 0.0


def test_a_release_during_the_lease_threads_grant_is_not_undone_by_it():
    """A clean stop releases the lease while the lease's own thread may be granting it: the grant must not land
    after the release, or leaving the election finds a lease in force and halts the JVM (seen in make test: a
    stop that had stopped the query cleanly then fenced its own host)."""
    clock, jvm = FakeClock(), FakeJvm()
    e = election(clock)
    lease = Lease(None, e, jvm=jvm, start=False)
    confirm(e, clock)
    lease.hold()
    granting, go_on = threading.Event(), threading.Event()
    grant = jvm.grant

    def slow_grant(valid_for_ms, wall_deadline_ms):
        granting.set()
        go_on.wait(5)
        return grant(valid_for_ms, wall_deadline_ms)

    jvm.grant = slow_grant
    ticking = threading.Thread(target=lease.tick)
    ticking.start()
    assert granting.wait(5)  # the tick saw the lease held and is granting it
    releasing = threading.Thread(target=lease.release)
    releasing.start()
    releasing.join(0.3)
    go_on.set()
    ticking.join(5)
    releasing.join(5)
    assert jvm.state == OFF, "the lease's own thread granted the lease again after the release"
    lease.step_down()  # what leaving the election does: nothing in force, nothing to fence
    assert "revoke" not in jvm.calls and not jvm.exited


def test_a_lost_lease_leaves_the_election_and_a_fenced_jvm_refuses_a_start_with_exit_75():
    clock, jvm = FakeClock(), FakeJvm()
    e = election(clock)
    lease = Lease(None, e, jvm=jvm, start=False)
    confirm(e, clock)
    lease.hold()
    lease.fence()  # another host holds the flow: revoked, the JVM halted, the election left
    assert jvm.calls == ["revoke"] and jvm.exited
    assert e.leadership.closed
    fenced_jvm = FakeJvm()
    fenced_jvm.state = FENCED
    e2 = election(clock)
    confirm(e2, clock)
    with pytest.raises(Fenced) as fenced:
        Lease(None, e2, jvm=fenced_jvm, start=False).hold()
    assert fenced.value.exit_status == 75
    # the JVM halted by itself (its supervisor was paused past the lease): the lease's thread leaves the election
    clock3, jvm3 = FakeClock(), FakeJvm()
    e3 = election(clock3)
    lease3 = Lease(None, e3, jvm=jvm3, start=False)
    assert lease3.turn()
    jvm3.exited = True
    assert not lease3.turn()
    assert e3.leadership.closed


def test_leaving_the_election_on_an_error_revokes_a_lease_in_force_first_and_waits_for_what_was_sent():
    clock, jvm = FakeClock(), FakeJvm()
    e = election(clock)
    lease = Lease(None, e, jvm=jvm, start=False)
    confirm(e, clock)
    lease.hold()
    e._at_exit()  # an error ends mirrord while the query runs: the JVM halts before the group is left
    assert jvm.calls == ["revoke"] and jvm.exited and e.leadership.closed

    # a clean stop: the lease released, the election left once the producers have nothing in flight
    clock2, jvm2 = FakeClock(), FakeJvm()
    e2 = election(clock2)
    lease2 = Lease(None, e2, jvm=jvm2, start=False)
    confirm(e2, clock2)
    lease2.hold()
    lease2.release()
    jvm2.flying = 3
    lease2.settle(patience=0.2)  # still in flight, and the last lease's records may still land: it waited
    assert not e2.leadership.closed
    jvm2.flying = 0
    e2.close()
    assert e2.leadership.closed and jvm2.calls == ["release"]


def test_a_hand_over_seen_by_the_election_fences_a_lease_in_force_before_the_partition_goes():
    clock, jvm = FakeClock(), FakeJvm()
    e = election(clock)
    lease = Lease(None, e, jvm=jvm, start=False)
    confirm(e, clock)
    lease.hold()
    e._revoked()  # the election's thread, in the revocation callback
    assert jvm.calls == ["revoke"] and jvm.exited
    # a standby's revocation (no lease): nothing to fence
    clock2, jvm2 = FakeClock(), FakeJvm()
    e2 = election(clock2)
    Lease(None, e2, jvm=jvm2, start=False)
    e2._revoked()
    assert jvm2.calls == [] and not jvm2.exited


# -- a lapsed member taken out at the target's return -------------------------------------------------------------
class MemberConsumer:
    def __init__(self, member: str):
        self.member = member

    def memberid(self) -> str:
        return self.member


def test_at_the_targets_return_a_host_takes_out_only_its_own_member_that_a_restarted_coordinator_may_keep():
    """The held flow's member once its session lapsed; a standby's member only when the outage outlived its session;
    the active host's live member never; each only once."""
    from mirrord.fencing.election import Leadership
    from mirrord.identity import FlowIdentity

    identity = FlowIdentity.of("f", "cluster-id", "g")
    e = election(FakeClock(), active=False)
    e.leadership = Leadership({"bootstrap.servers": "127.0.0.1:1"}, identity, e.timing, e.confirmations,
                              on_revoked=lambda: None)
    asked = []
    e.leave = lambda group, members, timeout: asked.append((group, members)) or dict.fromkeys(members, "NONE")

    def returned(away: float) -> list:
        asked.clear()
        e.target_returned(away)
        for thread in [t for t in threading.enumerate() if t.name == "leave-lapsed"]:
            thread.join(5)
        return [members for _, members in asked]

    tp = [SimpleNamespace(topic=identity.election_topic, partition=0)]
    e.leadership._on_assign(MemberConsumer("standby-1"), [])  # a standby: nothing assigned
    assert returned(SESSION / 1000 - 1) == []  # its session may still be alive
    assert returned(SESSION / 1000 + 1) == [["standby-1"]]
    e.leadership._on_assign(MemberConsumer("active-2"), tp)  # elected
    assert returned(SESSION / 1000 + 1) == []  # its session is alive: it holds the flow
    e.leadership._on_lost(MemberConsumer(""), tp)  # lapsed in an outage: librdkafka has forgotten its id
    assert returned(1) == [["active-2"]]
    assert asked[0][0] == identity.election_group
    assert returned(SESSION / 1000 + 1) == []  # taken out once
    e.leadership._on_assign(MemberConsumer("active-3"), tp)
    assert returned(SESSION / 1000 + 1) == []
