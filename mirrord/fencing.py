"""One active host per flow, and the fence that keeps it one: the one module for both (docs/decisions.md §6).

The election. Every host running the flow joins one consumer group (`<group.id>.leader`) subscribed to a
one-partition topic on the target (`mirrord-leader.<group.id>.internal`); the group coordinator assigns
that partition to one member, and that member mirrors; the others stand by. Nothing is ever consumed from
the topic: membership is the whole protocol, as MirrorMaker 1 users ran several instances in one group.

The lease. The elected host confirms its membership every tenth of the session by committing an offset to
the election's group: Kafka's coordinator accepts a commit only from a member of the group's current
generation, and restarts that member's session when it does, so it cannot hand the flow to another host
before the start of that commit plus the session. Spark's JVM, which sends the records, holds a lease
(io.mirrord.fencing.Fence) granted up to `lease_ms` (half the session) after the start of the last
confirmed commit, checked against a monotonic and a wall clock; the producers' timeouts are bounded so that
a record the JVM accepted before the lease ran out is delivered or failed before the coordinator could
hand the flow over (`Timing`, `bound_producer`). Leaving the election on purpose, or because the lease was
lost, waits for what was sent under it first (`Election.close`), so a standby takes over at once, never
beside this host.
"""

from __future__ import annotations

import atexit
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from mirrord.errors import Fenced, MirrordError
from mirrord.kafka import admin
from mirrord.kafka.kafkalog import with_logger

log = logging.getLogger(__name__)


# -- the timing: every interval of the fence, from the election's session ----------------------------------------
def lease_ms(session_ms: int) -> int:
    """The lease: half the election's session, counted from the start of the last confirmed commit."""
    return session_ms // 2


@dataclass(frozen=True)
class Timing:
    """The fence's intervals from `leader.session.timeout.ms` (S): lease + max.block.ms + delivery.timeout.ms +
    guard = S. A record accepted before the lease ran out enters the producer within max.block.ms and is
    delivered or failed within delivery.timeout.ms, so the last byte this host sends leaves a guard's time
    before the coordinator may give the flow to another host."""

    session_ms: int

    @property
    def lease_ms(self) -> int:
        return lease_ms(self.session_ms)

    @property
    def block_ms(self) -> int:
        """The producer's max.block.ms: how long a record may wait for metadata or buffer space before it is
        in a batch."""
        return self.session_ms // 10

    @property
    def guard_ms(self) -> int:
        """Left for the network to carry the last request, and for clock-rate differences."""
        return self.session_ms // 10

    @property
    def delivery_ms(self) -> int:
        """The producer's delivery.timeout.ms: 3/10 of the session."""
        return self.session_ms - self.lease_ms - self.block_ms - self.guard_ms

    @property
    def quarantine_ms(self) -> int:
        """After a lapse, no new lease until what the old one let through was delivered or failed."""
        return self.block_ms + self.delivery_ms

    @property
    def confirm_every_ms(self) -> int:
        return max(100, self.session_ms // 10)

    @property
    def heartbeat_ms(self) -> int:
        return max(100, self.session_ms // 5)


def bound_producer(sink: Mapping[str, str], producer, session_ms: int) -> dict[str, str]:
    """The sink's options (`kafka.*`) with the producer's timeouts inside the lease's budget (`Timing`), so a
    record not delivered in time fails instead of landing after another host took the flow over:
    delivery.timeout.ms and max.block.ms at most the budget's, request.timeout.ms what delivery leaves after
    linger.ms (Kafka wants delivery >= linger + request). Larger values in producer.properties (`producer`: its
    ClientConfig) are lowered, with a line in the journal; a linger.ms over half the delivery time is refused."""
    timing = Timing(session_ms)
    given = producer.properties

    def number(key: str) -> int | None:
        if key not in given:
            return None
        try:
            return int(str(given[key]).strip())
        except ValueError:
            raise producer.error(key, f"must be a whole number of milliseconds, got {given[key]!r}") from None

    out = dict(sink)
    linger = number("linger.ms")
    linger = int(out.get("kafka.linger.ms", "0")) if linger is None else linger
    delivery = min(timing.delivery_ms, number("delivery.timeout.ms") or timing.delivery_ms)
    if linger * 2 > delivery:
        raise producer.error("linger.ms", f"{linger} leaves less than half of the {delivery} ms a record may take to "
                                          f"be delivered under leader election (leader.session.timeout.ms="
                                          f"{session_ms}, docs/decisions.md §6): lower it, or raise the session")
    bounds = {"delivery.timeout.ms": delivery, "request.timeout.ms": delivery - linger,
              "max.block.ms": timing.block_ms}
    for key, bound in bounds.items():
        value = number(key)
        if value is not None and value > bound:
            log.warning("%s: %s = %d lowered to %d: under leader election a record not delivered within the lease "
                        "must fail instead of landing after a standby took over (leader.session.timeout.ms=%d, "
                        "docs/decisions.md §6)", producer.path.name, key, value, bound, session_ms)
        out[f"kafka.{key}"] = str(bound if value is None else min(value, bound))
    return out


# -- the clocks ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stamp:
    """A moment on two clocks: `boot`, monotonic and counting a suspension (CLOCK_BOOTTIME, where there is one),
    and `wall`, which counts a paused VM once its time is corrected."""

    boot: float
    wall: float


_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


class Clock:
    """The fence's clocks; tests inject their own."""

    def stamp(self) -> Stamp:
        return Stamp(time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic(), time.time())

    def age(self, then: Stamp) -> float:
        """Seconds since `then` by whichever clock says more: a lease is over when either clock says so."""
        now = self.stamp()
        return max(now.boot - then.boot, now.wall - then.wall)


# -- the election's confirmations -------------------------------------------------------------------------------
class Confirmations:
    """The start of the last commit the election's coordinator accepted from this member. The commits go out
    from the election's thread and are answered there; the lease reads `last()` from its own thread. A commit
    is known by its id, in the committed offset's metadata (the offset is 0: nothing is ever consumed);
    answers to commits begun before this host lost its assignment are ignored."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[int, Stamp]] = {}  # commit id -> (epoch, its start)
        self._next = 1
        self._epoch = 0
        self._last: Stamp | None = None
        self._begun: Stamp | None = None

    def begin(self) -> int:
        with self._lock:
            commit, self._next = self._next, self._next + 1
            self._begun = self.clock.stamp()
            self._pending[commit] = (self._epoch, self._begun)
            return commit

    def done(self, commit: int, ok: bool) -> None:
        with self._lock:
            epoch, began = self._pending.pop(commit, (None, None))
            if ok and epoch == self._epoch and (self._last is None or began.boot > self._last.boot):
                self._last = began

    def forget(self) -> None:
        """This host lost its assignment: nothing confirmed, and no answer to an earlier commit counts."""
        with self._lock:
            self._epoch += 1
            self._pending.clear()
            self._last = None

    def last(self) -> Stamp | None:
        with self._lock:
            return self._last

    def due(self, every_ms: int, patience_ms: int) -> bool:
        """Whether to begin a commit now: none begun for `every_ms`, and none pending younger than `patience_ms`
        (a commit the coordinator does not answer is not waited for forever)."""
        with self._lock:
            if self._begun is not None and self.clock.age(self._begun) * 1000 < every_ms:
                return False
            return all(self.clock.age(began) * 1000 >= patience_ms for _, began in self._pending.values())

    def remaining_ms(self, lease: int) -> float:
        """What is left of a lease of `lease` ms from the last confirmation (0 or less: none)."""
        last = self.last()
        return 0.0 if last is None else lease - self.clock.age(last) * 1000


# -- the election ---------------------------------------------------------------------------------------------------
def leader_topic(group_id: str) -> str:
    """The election's topic: MirrorMaker 2's `.internal` suffix keeps every mirror from copying it."""
    return f"mirrord-leader.{re.sub(r'[^A-Za-z0-9._-]', '_', group_id)}.internal"[:249]


def leader_group(group_id: str) -> str:
    return f"{group_id}.leader"


class Leadership:
    """This host's member of the election's group: assignment, revocation and the confirming commits, all in
    one thread of its own (rebalance and commit callbacks are served by its poll)."""

    POLL = 0.1

    def __init__(self, settings: Mapping[str, str], group_id: str, timing: Timing, confirmations: Confirmations,
                 on_revoked: Callable[[], None]):
        self.topic = leader_topic(group_id)
        self.group = leader_group(group_id)
        self.timing = timing
        self.confirmations = confirmations
        self.on_revoked = on_revoked
        self._closing = threading.Event()
        self._closed = False
        self._active = threading.Event()
        self._thread: threading.Thread | None = None
        self.client_id = f"mirrord-leader-{uuid.uuid4().hex[:12]}"  # this host's member, in the group's description
        self._consumer = Consumer({
            **with_logger(dict(settings)),
            "client.id": self.client_id,
            "group.id": self.group,
            "session.timeout.ms": timing.session_ms,
            "heartbeat.interval.ms": timing.heartbeat_ms,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "partition.assignment.strategy": "cooperative-sticky",  # a host joining leaves the active one be
            "on_commit": self._on_commit,
        })

    def start(self) -> None:
        self._consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                 on_lost=self._on_lost)
        self._thread = threading.Thread(target=self._loop, name="leadership", daemon=True)
        self._thread.start()

    def is_active(self) -> bool:
        return self._active.is_set()

    def _on_assign(self, consumer, partitions) -> None:
        if partitions and not self._active.is_set():
            log.info("this host is the flow's active host (group %s on %s)", self.group, self.topic)
            self._active.set()

    def _on_revoke(self, consumer, partitions) -> None:
        """Given up on the coordinator's request (or leaving): another member gets the partition as soon as
        this returns, so the lease is fenced first."""
        if partitions and self._active.is_set():
            self._active.clear()
            self.confirmations.forget()
            if not self._closing.is_set():
                log.warning("this host gave the flow's election up to another host (group %s)", self.group)
            self.on_revoked()

    def _on_lost(self, consumer, partitions) -> None:
        """The session lapsed (no heartbeat reached the coordinator for the session: an outage, a partition, a
        pause): the lease runs out by itself, half a session after the last confirmation at most."""
        if partitions and self._active.is_set():
            log.warning("this host is no longer the flow's active host (group %s): its session lapsed", self.group)
            self._active.clear()
            self.confirmations.forget()

    def _on_commit(self, err, partitions) -> None:
        for tp in partitions or ():
            if tp.topic == self.topic and (tp.metadata or "").isdigit():
                self.confirmations.done(int(tp.metadata), err is None and tp.error is None)

    def _confirm(self) -> None:
        if not self._active.is_set() or not self.confirmations.due(self.timing.confirm_every_ms,
                                                                     self.timing.lease_ms):
            return
        commit = self.confirmations.begin()
        try:
            self._consumer.commit(offsets=[TopicPartition(self.topic, 0, 0, metadata=str(commit))], asynchronous=True)
        except (KafkaException, RuntimeError) as exc:  # no group coordinator now: not confirmed
            self.confirmations.done(commit, False)
            log.debug("cannot confirm the election: %s", exc)

    def _loop(self) -> None:
        """Serves the callbacks and confirms while elected; no record is ever read (the topic stays empty). It
        goes on while mirrord stops (a stop may wait for the target's acknowledgements) until close()."""
        while not self._closing.is_set():
            try:
                self._consumer.poll(self.POLL)
                self._confirm()
            except KafkaException as exc:
                log.warning("leader election: %s", exc.args[0].str())
            except RuntimeError:  # closed meanwhile
                break

    def held_elsewhere(self, target: admin.Cluster) -> bool:
        """Whether another member holds the election's partition now: this host's loss was a hand-over, not
        a session that lapsed while the cluster was away and will be rejoined. Members are told apart by
        client id: the consumer's own memberid() can block for good while its session is being lost."""
        return any(client != self.client_id for client in target.assigned_clients(self.group))

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Leave the group now, so a standby takes over without waiting for the session to expire."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.debug("leaving group %s: %s", self.group, exc)
        self._active.clear()


class Election:
    """This host's part in the flow's election (leader.election.enabled): joins it on first use, then says
    whether this host may mirror. Off, every host may, and there is no lease."""

    def __init__(self, settings, target, clock: Clock | None = None):
        self.settings = settings  # the flow's Settings (a reload replaces it; the session is not reloadable)
        self.target = target  # admin.Cluster of the target, where the election lives
        self.timing = Timing(settings.leader_session_timeout_ms)
        self.clock = clock or Clock()
        self.confirmations = Confirmations(self.clock)
        self.leadership: Leadership | None = None
        self.lease: Lease | None = None  # the JVM's lease, once Spark runs
        self.joined_at = 0.0
        self._lock = threading.RLock()

    def active(self) -> bool:
        """This host holds the election's partition (or there is no election)."""
        return self.leadership is None or self.leadership.is_active()

    def confirmed(self) -> Stamp | None:
        """The start of the last commit the coordinator accepted while this host holds the partition."""
        if self.leadership is None or not self.leadership.is_active():
            return None
        return self.confirmations.last()

    def elected(self, admin_settings: Mapping[str, str]) -> bool:
        """Whether this host may mirror now (holds the partition, confirmed within the lease); raises
        MirrordError while the election's topic cannot be made."""
        s = self.settings
        if not s.leader_election:
            return True
        if self.leadership is None:
            admin.ensure_internal_topic(self.target, leader_topic(s.group_id), "leader election")
            self.leadership = Leadership(admin_settings, s.group_id, self.timing, self.confirmations,
                                         self._revoked)
            self.leadership.start()
            self.joined_at = time.monotonic()
            atexit.register(self._at_exit)  # any exit, an error's too: a standby takes over now, not a session later
        return self.leadership.is_active() and self.confirmations.remaining_ms(self.timing.lease_ms) > 0

    def handed_over(self, target_up: bool) -> bool:
        """Whether another host holds the flow now (this one lost it while mirroring). While the target
        (where the election lives) is unreachable, or the group shows no other holder, this host's lapsed
        session is an outage's, and it rejoins; its lease ran out meanwhile (`Lease`)."""
        if self.leadership is None or not target_up:
            return False
        try:
            return self.leadership.held_elsewhere(self.target)
        except Exception as exc:  # noqa: BLE001 - the target went away again: not a hand-over yet
            log.debug("cannot describe the election's group: %s", exc)
            return False

    def _revoked(self) -> None:
        if self.lease is not None:
            self.lease.step_down()

    def close(self, timeout: float | None = None) -> None:
        """Leave the election, once nothing this host sent under its lease can still land (`Lease.settle`): a
        standby takes over at once, never beside it. Any path: a clean stop, a fenced host, an error's exit
        (atexit: a lease still in force is revoked first, its JVM halted); `timeout` bounds the wait."""
        if timeout is not None:
            closer = threading.Thread(target=self.close, name="leave-election", daemon=True)
            closer.start()
            closer.join(timeout)
            return
        with self._lock:
            leadership = self.leadership
            if leadership is None or leadership.closed:
                return
            if self.lease is not None:
                self.lease.settle()
            leadership.close()

    def _at_exit(self) -> None:
        if self.lease is not None:
            self.lease.step_down()
        self.close(timeout=10.0)


# -- the lease ------------------------------------------------------------------------------------------------------
class JvmFence:
    """io.mirrord.fencing.Fence in Spark's JVM, over py4j: the one place mirrord's Python talks to it."""

    def __init__(self, spark):
        self._spark = spark

    def _fence(self):
        return self._spark._jvm.io.mirrord.fencing.Fence.jvm()

    def configure(self, quarantine_ms: int) -> None:
        self._fence().configure(quarantine_ms)

    def grant(self, valid_for_ms: int, wall_deadline_ms: int) -> bool:
        return bool(self._fence().grant(valid_for_ms, wall_deadline_ms))

    def pulse(self) -> str:
        return str(self._fence().pulse())

    def release(self) -> None:
        self._fence().release()

    def revoke(self) -> None:
        self._fence().revoke()

    def in_flight(self) -> int:
        from mirrord.spark.session import in_flight

        return in_flight(self._spark)

    def gone(self, wait: float = 0.0) -> bool:
        """Whether Spark's JVM has exited, waiting up to `wait` seconds for it."""
        from mirrord.spark.session import jvm_exit_status

        deadline = time.monotonic() + wait
        while jvm_exit_status() is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True


HELD, LAPSED, FENCED, OFF = "HELD", "LAPSED", "FENCED", "OFF"


class Lease:
    """The active host's lease in the JVM that sends the records (`jvm`: io.mirrord.fencing.Fence), granted from
    the election's confirmations by a thread of its own while the query runs (`held`), with a pulse every
    `EVERY` seconds that says the supervisor answers. A supervisor that stopped answering (a hung interpreter,
    SIGSTOP) pulses no more: its JVM halts once the lease runs out. One that answers but cannot confirm the
    election (an outage, a partition) lets the lease run out: records are refused and fail, the JVM goes on,
    and the query restarts once this host is elected and confirmed again."""

    EVERY = 0.25

    def __init__(self, spark, election: Election, jvm=None, start: bool = True):
        self.election = election
        self.timing = election.timing
        self.clock = election.clock
        self.jvm = jvm if jvm is not None else JvmFence(spark)
        self.jvm.configure(self.timing.quarantine_ms)
        self.held = False
        self.state = OFF
        self.until: Stamp | None = None  # the end of the last lease granted
        election.lease = self
        if start:
            threading.Thread(target=self._loop, name="lease", daemon=True).start()

    def _grant(self) -> bool:
        last = self.election.confirmed()
        if last is None:
            return False
        remaining = self.timing.lease_ms - self.clock.age(last) * 1000
        if remaining < 1:
            return False
        granted = self.jvm.grant(int(remaining), int(last.wall * 1000) + self.timing.lease_ms)
        if granted:
            self.until = Stamp(last.boot + self.timing.lease_ms / 1000, last.wall + self.timing.lease_ms / 1000)
        return granted

    def tick(self) -> str:
        """One turn: the lease granted again from the last confirmation while held, then a pulse."""
        if self.held:
            self._grant()
        state = self.jvm.pulse()
        if state != self.state:
            if state == LAPSED:
                log.warning("the lease lapsed: this host has not confirmed its hold on the flow for %.1fs; records "
                            "are refused, and those buffered fail (docs/decisions.md §6)", self._unconfirmed())
            elif state == HELD and self.state == LAPSED:
                log.info("the lease is granted again: this host's hold on the flow is confirmed")
            self.state = state
        return state

    def _unconfirmed(self) -> float:
        last = self.until
        return float("nan") if last is None else self.clock.age(last) + self.timing.lease_ms / 1000

    def _loop(self) -> None:
        """Pulses for as long as the process lives, also while mirrord stops (a stop may wait a minute for the
        target's acknowledgements), until the JVM is gone."""
        while self.turn():
            time.sleep(self.EVERY)

    def turn(self) -> bool:
        """A tick; False once Spark's JVM is gone (it halted when the lease was fenced, or exited), which ends the
        election's membership at once: a standby takes over now, not a session later."""
        try:
            self.tick()
        except Exception as exc:  # noqa: BLE001 - py4j errors of several kinds while the JVM goes
            if self.jvm.gone(wait=1.0):
                log.error("Spark's JVM is gone (fenced, or it exited): leaving the flow's election")
                self.held = False
                self.election.close()
                return False
            log.warning("cannot reach the lease in Spark's JVM: %s", exc)
        return True

    def hold(self) -> None:
        """The query is about to start: the lease granted now, or the start refused (MirrordError, retried;
        Fenced when this host is fenced)."""
        if self.jvm.pulse() == FENCED:
            raise Fenced("this host is fenced: restart as a standby")
        if not self._grant():
            raise MirrordError("this host's hold on the flow is not confirmed now (the election's coordinator has "
                               "not accepted a commit within the lease, or a lapsed lease's records may still be "
                               "delivered)")
        self.held = True
        self.state = HELD

    def release(self) -> None:
        """This host stopped mirroring on purpose: no lease, and nothing to fence."""
        self.held = False
        self.jvm.release()

    def revoke(self) -> None:
        """Fence now: every record refused, the JVM halted at once with what its producers buffered."""
        self.held = False
        self.jvm.revoke()

    def fence(self) -> None:
        """This host lost the flow while mirroring (another host holds it): revoke, wait for the JVM to halt,
        and leave the election."""
        self.step_down("this host lost the flow's election while mirroring (its JVM halts with whatever its "
                       "producers still buffered; the next active host resumes from the acknowledged offsets)")
        self.election.close()

    def step_down(self, why: str = "") -> None:
        """A lease in force revoked, and the JVM waited for until it halted: before the election's partition goes
        to another member (the election's thread), before mirrord exits on an error (atexit), on a hand-over."""
        try:
            state = self.jvm.pulse()
            if state in (HELD, LAPSED):
                log.error("%s: fencing this host first", why or "this host is leaving the flow's election while it "
                                                               "holds a lease")
                self.revoke()
            elif state != FENCED:
                return  # no lease in force: nothing was sent under one that is not settled
        except Exception as exc:  # noqa: BLE001 - the JVM is gone already, or halts while py4j talks to it
            log.debug("fencing: %s", exc)
        self.jvm.gone(wait=5.0)

    def settle(self, patience: float | None = None) -> None:
        """Before this host leaves the election: wait until nothing it sent under a lease can still be
        delivered: the JVM gone, or its producers with nothing in flight, or the last lease plus what a record
        may take after it (max.block.ms and delivery.timeout.ms) over."""
        if self.until is None:
            return
        deadline = time.monotonic() + (patience if patience is not None else
                                       (self.timing.lease_ms + self.timing.quarantine_ms) / 1000)
        while time.monotonic() < deadline:
            try:
                if self.jvm.gone() or self.jvm.in_flight() == 0:
                    return
            except Exception:  # noqa: BLE001 - the JVM went meanwhile
                return
            if self.clock.age(self.until) * 1000 >= self.timing.quarantine_ms:
                return
            time.sleep(0.05)
