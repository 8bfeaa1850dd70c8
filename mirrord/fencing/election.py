"""The flow's election through a consumer group on the target, and its confirmations (docs/decisions.md §6)."""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from mirrord.errors import MirrordError, one_line
from mirrord.fencing.timing import Clock, Stamp, Timing
from mirrord.identity import FlowIdentity, Legacy
from mirrord.kafka import admin
from mirrord.kafka.kafkalog import with_logger

log = logging.getLogger("mirrord.fencing")


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
EARLIER_FOREVER = float("inf")  # the earlier release's election was seen empty: never looked at again
RECONNECT_BACKOFF_MAX_MS = 1000


class Leadership:
    """This host's member of the election's group: assignment, revocation and the confirming commits, all in
    one thread of its own (rebalance and commit callbacks are served by its poll)."""

    POLL = 0.1

    def __init__(self, settings: Mapping[str, str], identity: FlowIdentity, timing: Timing,
                 confirmations: Confirmations, on_revoked: Callable[[], None],
                 on_confirmed: Callable[[], None] = lambda: None):
        self.identity = identity
        self.topic = identity.election_topic
        self.group = identity.election_group
        self.timing = timing
        self.confirmations = confirmations
        self.on_revoked = on_revoked
        self.on_confirmed = on_confirmed  # called at the first confirmation of each assignment
        self._unconfirmed = False  # assigned, not yet confirmed
        self.lapsed = False  # lost its assignment with its session (an outage), not yet assigned and confirmed again
        self.member = ""  # this host's member id in the group, as of its last assignment
        self._lapsed_member = ""  # the member id whose session lapsed while it held the flow, until taken out
        self._closing = threading.Event()
        self._closed = False
        self._active = threading.Event()
        self._thread: threading.Thread | None = None
        self.client_id = identity.member_id()  # this host's member, in the group's description
        self._consumer = Consumer({
            # after an outage librdkafka waits up to reconnect.backoff.max.ms (10 s) between tries: the election is
            # rejoined within a second of the target's return instead, unless the target's properties say otherwise
            "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
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
        self.member = consumer.memberid() or ""  # a join just completed: the id is known (no lapse under way)
        if partitions and not self._active.is_set():
            log.info("this host is the flow's active host (group %s on %s)", self.group, self.topic)
            self._unconfirmed = True
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
            self.lapsed = True
            self._lapsed_member = self.member
            self._active.clear()
            self.confirmations.forget()

    def _on_commit(self, err, partitions) -> None:
        for tp in partitions or ():
            if tp.topic == self.topic and (tp.metadata or "").isdigit():
                self.confirmations.done(int(tp.metadata), err is None and tp.error is None)
        if self._unconfirmed and self._active.is_set() and self.confirmations.last() is not None:
            self._unconfirmed = self.lapsed = False
            self.on_confirmed()  # the supervisor starts the query now, not at its next turn

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

    def lapsed_members(self, outlived_session: bool) -> list[str]:
        """This host's member ids that a restarted coordinator may still keep in the group: the one whose session
        lapsed while it held the flow; a standby's, when the outage outlived its session (taken out in error, a
        standby only rejoins)."""
        member = self._lapsed_member or (self.member if outlived_session and not self._active.is_set() else "")
        if member:  # each once: the next join's id is recorded anew
            self._lapsed_member = self.member = ""
        return [member] if member else []

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
    whether this host may mirror. Off, every host may, and there is no lease.

    The election is the flow's (`identity`, asked once both clusters answer: the source's cluster id). Before
    joining it, a host waits while members of the election of the release before (`<group.id>.leader`) are
    there: in a rolling upgrade an old host and a new one are never active at once."""

    EARLIER_EVERY = 5.0  # seconds between looks at the earlier release's election while it has members

    def __init__(self, settings, target, clock: Clock | None = None,
                 identity: Callable[[], FlowIdentity] | None = None):
        self.settings = settings  # the flow's Settings (a reload replaces it; the session is not reloadable)
        self.target = target  # admin.Cluster of the target, where the election lives
        self.identity = identity
        self.timing = Timing(settings.leader_session_timeout_ms)
        self.clock = clock or Clock()
        self.confirmations = Confirmations(self.clock)
        self.leadership: Leadership | None = None
        self.lease = None  # the JVM's lease (lease.Lease, which imports this module), handed over once Spark runs
        self.joined_at = 0.0
        self.earlier: list[str] = []  # members of the earlier release's election, while this host waits for them
        self.on_change: Callable[[], None] = lambda: None  # this host's hold on the flow was confirmed
        # members of a group on the target taken out by id (group, member ids, timeout s) -> {member id: error}
        self.leave: Callable[[str, list[str], float], dict[str, str]] | None = None
        self._earlier_seen = -EARLIER_FOREVER
        self._lock = threading.RLock()

    def active(self) -> bool:
        """This host holds the election's partition (or there is no election)."""
        if self.leadership is None:
            return not self.earlier
        return self.leadership.is_active()

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
            try:
                if self._earlier_release_holds():
                    return False
                identity = self.identity()
            except MirrordError:
                raise
            except Exception as exc:  # noqa: BLE001 - librdkafka's and py4j's errors: a cluster away, asked again
                raise MirrordError(f"cannot look at the flow's election on the target: {one_line(str(exc))}") from None
            admin.ensure_internal_topic(self.target, identity.election_topic, "leader election")
            self.leadership = Leadership(admin_settings, identity, self.timing, self.confirmations, self._revoked,
                                         lambda: self.on_change())
            self.leadership.start()
            self.joined_at = time.monotonic()
            atexit.register(self._at_exit)  # any exit, an error's too: a standby takes over now, not a session later
        return self.leadership.is_active() and self.confirmations.remaining_ms(self.timing.lease_ms) > 0

    def waiting(self, target_since: float, patience: float) -> tuple[float, float]:
        """Since when this host waits for the election's assignment, and for how long before it stands by: since it
        joined, `patience`; once its session lapsed in an outage, since the target answers again (`target_since`),
        and a session more: a coordinator that restarted meanwhile keeps the lapsed member until its session
        ends, and the rejoining one waits for it (a standby's place is not taken by a host that held the flow)."""
        if self.leadership is None or not self.leadership.lapsed:
            return self.joined_at, patience
        return max(self.joined_at, target_since), patience + self.timing.session_ms / 1000

    def target_returned(self, away: float) -> None:
        """The target answers again after `away` seconds. A group coordinator that restarted meanwhile reloaded the
        election's group with this host's lapsed member in it, and a host rejoining under a new member id would wait
        for that member's whole session (every host: a rebalance waits for all members): the member is taken out
        now, from a thread of its own (docs/decisions.md §6)."""
        leadership, leave = self.leadership, self.leave
        if leadership is None or leave is None:
            return
        members = leadership.lapsed_members(away * 1000 > self.timing.session_ms)
        if members:
            threading.Thread(target=self._take_out, args=(leave, leadership.group, members), name="leave-lapsed",
                             daemon=True).start()

    def _take_out(self, leave, group: str, members: list[str]) -> None:
        try:
            answers = leave(group, members, self.timing.session_ms / 1000)
        except MirrordError as exc:
            log.info("this host's lapsed member stays in election group %s until its session ends: %s", group, exc)
            return
        if any(error == "NONE" for error in answers.values()):
            log.info("took this host's lapsed member out of election group %s: it rejoins now, not a session later",
                     group)

    def _earlier_release_holds(self) -> bool:
        """Whether hosts of the release before are in its election (keyed by group.id alone), looked at every
        EARLIER_EVERY s until it is empty, then never again: they may be this flow's active host."""
        if self._earlier_seen == EARLIER_FOREVER:
            return False
        if time.monotonic() - self._earlier_seen < self.EARLIER_EVERY:
            return bool(self.earlier)
        group = Legacy(self.settings.group_id, self.settings.flow, self.settings.source_alias).election_group
        members = self.target.group_members(group)
        self._earlier_seen = time.monotonic()
        if members and members != self.earlier:
            log.warning("hosts of an earlier mirrord release are in election group %s on the target (%s): this host "
                        "stands by until they have left (a rolling upgrade; or another flow whose consumer.properties "
                        "share group.id %s)", group, ", ".join(members), self.settings.group_id)
        elif not members and self.earlier:
            log.info("the earlier release's hosts left election group %s: joining this flow's election", group)
        self.earlier = members
        if not members:
            self._earlier_seen = EARLIER_FOREVER
        return bool(members)

    def standby_reason(self) -> str:
        """Why this host stands by, for the journal and STATUS."""
        if self.earlier:
            return (f"hosts of an earlier mirrord release are in election group "
                    f"{Legacy(self.settings.group_id, '', '').election_group}")
        if self.leadership is None:
            return f"another host mirrors flow {self.settings.flow}"
        return f"another host mirrors {self.leadership.identity} (election group {self.leadership.group})"

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
