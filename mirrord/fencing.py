"""One active host per flow (docs/decisions.md §6), elected through Kafka itself.

Every host running the flow joins one consumer group (`<group.id>.leader`) subscribed to a
one-partition topic on the target cluster (`mirrord-leader.<group.id>.internal`); Kafka's group
coordinator assigns that partition to exactly one member, and that member mirrors. The others stand by.
When the active host dies, the coordinator notices after `leader.session.timeout.ms` and hands the
partition to a standby, which resumes from the offsets the active host committed to the source group
after each batch. A host that loses its assignment (its session expired, say in a long pause) stops
mirroring at once. Nothing is ever consumed from the topic: membership is the whole protocol, as
MirrorMaker 1 users ran several instances in one consumer group.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaException

from mirrord.errors import Fenced
from mirrord.kafka import admin
from mirrord.kafka.kafkalog import with_logger
from mirrord.spark.session import release_lease, renew_lease, revoke_lease, wait_jvm_exit

log = logging.getLogger(__name__)


def leader_topic(group_id: str) -> str:
    """The election's topic: MirrorMaker 2's `.internal` suffix keeps every mirror from copying it."""
    return f"mirrord-leader.{re.sub(r'[^A-Za-z0-9._-]', '_', group_id)}.internal"[:249]


def leader_group(group_id: str) -> str:
    return f"{group_id}.leader"


class Leadership:
    def __init__(self, settings: Mapping[str, str], group_id: str, session_timeout_ms: int):
        self.topic = leader_topic(group_id)
        self.group = leader_group(group_id)
        self._closing = threading.Event()
        self._active = threading.Event()
        self._thread: threading.Thread | None = None
        self.client_id = f"mirrord-leader-{uuid.uuid4().hex[:12]}"  # this host's member, in the group's description
        self._consumer = Consumer({
            **with_logger(dict(settings)),
            "client.id": self.client_id,
            "group.id": self.group,
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": max(100, session_timeout_ms // 5),
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "partition.assignment.strategy": "cooperative-sticky",  # a host joining leaves the active one be
        })

    def start(self) -> None:
        self._consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                 on_lost=self._on_revoke)
        self._thread = threading.Thread(target=self._loop, name="leadership", daemon=True)
        self._thread.start()

    def is_active(self) -> bool:
        return self._active.is_set()

    def _on_assign(self, consumer, partitions) -> None:
        if partitions and not self._active.is_set():
            log.info("this host is the flow's active host (group %s on %s)", self.group, self.topic)
            self._active.set()

    def _on_revoke(self, consumer, partitions) -> None:
        if partitions and self._active.is_set():
            log.warning("this host is no longer the flow's active host (group %s): standing by", self.group)
            self._active.clear()

    def _loop(self) -> None:
        """Rebalance callbacks are served by poll(); no record is ever read (the topic stays empty). It goes
        on while mirrord stops (a stop may wait for the target's acknowledgements) until close()."""
        while not self._closing.is_set():
            try:
                self._consumer.poll(0.5)
            except KafkaException as exc:
                log.warning("leader election: %s", exc.args[0].str())
            except RuntimeError:  # closed meanwhile
                break

    def held_elsewhere(self, target: admin.Cluster) -> bool:
        """Whether another member holds the election's partition now: this host's loss was a hand-over, not
        a session that lapsed while the cluster was away and will be rejoined. Members are told apart by
        client id: the consumer's own memberid() can block for good while its session is being lost."""
        return any(client != self.client_id for client in target.assigned_clients(self.group))

    def close(self) -> None:
        """Leave the group now, so a standby takes over without waiting for the session to expire
        (called once the query has stopped)."""
        self._active.clear()
        self._closing.set()
        if self._thread is not None:
            self._thread.join(5)
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.debug("leaving group %s: %s", self.group, exc)


class Election:
    """This host's part in the flow's election (leader.election.enabled): joins it on first use, then says
    whether this host may mirror. Off, every host may."""

    def __init__(self, settings, target):
        self.settings = settings  # the flow's Settings
        self.target = target  # admin.Cluster of the target, where the election lives
        self.leadership: Leadership | None = None
        self.joined_at = 0.0

    def active(self) -> bool:
        return self.leadership is None or self.leadership.is_active()

    def elected(self, admin_settings: Mapping[str, str]) -> bool:
        """Whether this host may mirror now; raises MirrordError while the election's topic cannot be made."""
        s = self.settings
        if not s.leader_election:
            return True
        if self.leadership is None:
            admin.ensure_internal_topic(self.target, leader_topic(s.group_id), "leader election")
            self.leadership = Leadership(admin_settings, s.group_id, s.leader_session_timeout_ms)
            self.leadership.start()
            self.joined_at = time.monotonic()
        return self.leadership.is_active()

    def handed_over(self, target_up: bool) -> bool:
        """Whether another host holds the flow now (this one lost it while mirroring). While the target
        (where the election lives) is unreachable, or the group shows no other holder, this host's lapsed
        session is an outage's, and it rejoins: an outage is a state, not a hand-over."""
        if self.leadership is None or not target_up:
            return False
        try:
            return self.leadership.held_elsewhere(self.target)
        except Exception as exc:  # noqa: BLE001 - the target went away again: not a hand-over yet
            log.debug("cannot describe the election's group: %s", exc)
            return False

    def close(self) -> None:
        if self.leadership is not None:
            self.leadership.close()


class Lease:
    """The active host's lease in the JVM that sends the records (io.mirrord.fencing.Fence), renewed every half
    second for `valid_for_ms` by a thread of its own while `held`: a supervisor busy with a reload or a
    slow admin call still holds it; one whose interpreter stopped or hung (every thread with it) does not,
    and its JVM fences itself once the lease lapses."""

    EVERY = 0.25
    SLOW = 1.0  # a renewal that takes longer than this is worth a line in the journal

    def __init__(self, spark, valid_for_ms: int):
        self.spark = spark
        self.valid_for_ms = valid_for_ms
        self.held = False
        threading.Thread(target=self._loop, name="lease", daemon=True).start()

    def _loop(self) -> None:
        """Renews for as long as the lease is held, also while mirrord stops (a stop may wait a minute for
        the target's acknowledgements): only release() ends it; the thread dies with the process."""
        last = time.monotonic()
        while True:
            time.sleep(self.EVERY)
            if not self.held:
                last = time.monotonic()
                continue
            began = time.monotonic()
            try:
                renewed = renew_lease(self.spark, self.valid_for_ms)
            except Exception as exc:  # noqa: BLE001 - the JVM does not answer: the supervisor sees it
                log.warning("cannot renew the lease (%.1fs since the last renewal): %s", began - last, exc)
                continue
            if not renewed:  # frozen past it, woken now: the JVM halts; the supervisor sees its exit
                log.error("the lease lapsed %.1fs after the last renewal: this host is fenced", began - last)
                self.held = False
                continue
            done = time.monotonic()
            if done - last > self.SLOW + self.EVERY:
                log.warning("the lease was renewed %.1fs after the last renewal (the call took %.1fs)", done - last,
                            done - began)
            last = done

    def hold(self) -> None:
        if not renew_lease(self.spark, self.valid_for_ms):
            raise Fenced("this host's lease lapsed: fenced; restart as a standby")
        self.held = True

    def release(self) -> None:
        """This host stopped mirroring on purpose: no lease, and nothing to fence."""
        self.held = False
        release_lease(self.spark)

    def revoke(self) -> None:
        """Fence now: every record refused, the JVM halted within 50 ms with what its producers buffered."""
        self.held = False
        revoke_lease(self.spark)

    def fence(self) -> None:
        """This host lost the flow while mirroring: revoke, and wait for the JVM to halt."""
        log.error("this host lost the flow's election: fencing it (its JVM halts with whatever its producers "
                  "still buffered; the next active host resumes from the acknowledged offsets)")
        try:
            self.revoke()
            wait_jvm_exit(5.0)
        except Exception as exc:  # noqa: BLE001 - the JVM halts while py4j talks to it
            log.debug("fencing: %s", exc)
