"""One streaming query's life on this host: its mode, where it resumes, its health, its stop.

The daemon owns at most one `Query` at a time. Starting one creates the target topics it will write,
picks the trigger mode (modes.py) and the resume point (resume.py), and starts Spark's query. Health
is mode-specific: a micro-batch may run at most `stall.timeout.ms`; a real-time batch ends on the
clock, so one whose end has not come `stall.timeout.ms` after it was due is stuck. Stopping copies
nothing twice: a micro-batch query stops between two batches; a real-time query stops at once, its
producers deliver what they buffered, and the positions the target acknowledged are committed to the
source group by their owner in the JVM (docs/decisions.md §10), which the next start resumes from.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import KafkaException

from mirrord.errors import MirrordError
from mirrord.identity import FlowIdentity
from mirrord.kafka import admin
from mirrord.positions import Positions
from mirrord.settings.flow import Flow
from mirrord.settings.keys import EXACTLY_ONCE
from mirrord.spark import exactly_once, resume
from mirrord.spark.modes import Mode
from mirrord.spark.pipeline import Pipeline
from mirrord.spark.session import (
    WRITER,
    failure,
    flush_positions,
    in_flight,
    jvm_class,
    jvm_positions,
    jvm_totals,
    quiet_task_aborts,
    running_tasks,
    stop_between_batches,
)

log = logging.getLogger(__name__)
MAX_REQUEST_SIZE = 1048576  # Kafka's producer's default max.request.size
DRAIN_POLL = 0.05
SETTLE = 0.5  # seconds a drained query must stay drained before its stop counts as clean (settled)


class TargetTopics:
    """Creates each source topic's copy in the target (same partition count; with topic config sync, the
    source topic's own configs) before its records can be written, and adds partitions as the source
    grows. The target is asked only about topics not yet seen. `on_ready` hears of each copy made or grown (the
    streams take its new partitions up at once: io.mirrord.source.TargetCopies)."""

    def __init__(self, flow: Flow, source: admin.Cluster, target: admin.Cluster,
                 on_refused: Callable[[str], None] = lambda _topic: None,
                 on_ready: Callable[[dict[str, int]], None] = lambda _ready: None):
        self.flow = flow
        self.source = source
        self.target = target
        self.on_refused = on_refused
        self.on_ready = on_ready
        self._ready: dict[str, int] = {}  # source topic → partitions known to exist in the target
        self._sized: set[str] = set()  # source topics whose max.message.bytes was looked at

    def ensure(self, wanted: dict[str, int]) -> None:
        new = {t: n for t, n in wanted.items() if self._ready.get(t, 0) < n}
        if new:
            admin.ensure_topics(new, self.target, self.flow.policy,
                                self.source if self.flow.settings.sync_topic_configs else None, self.on_refused)
            self._ready.update(new)
            self.on_ready(new)
            self._warn_too_large(set(new) - self._sized)

    def _warn_too_large(self, topics: set[str]) -> None:
        """Names, once per topic, a source topic that accepts records larger than the producer may send: such a
        record would stop mirrord when it comes (docs/operations.md), and this says so before it does."""
        if not topics:
            return
        try:
            limit = int(self.flow.target_properties.get("max.request.size", MAX_REQUEST_SIZE))
            sizes = self.source.raised_max_message_bytes(sorted(topics))
        except (KafkaException, MirrordError, ValueError) as exc:  # DescribeConfigs denied, the source away: none
            log.debug("cannot read the source topics' max.message.bytes: %s", exc)
            return
        self._sized |= topics
        for topic, size in sorted(sizes.items()):
            if size > limit:
                log.warning("source topic %s accepts records up to %d bytes (max.message.bytes) but the producer "
                            "sends at most %d (max.request.size in producer.properties): a larger record will stop "
                            "mirrord until max.request.size is raised above it", topic, size, limit)


class Query:
    def __init__(self, spark, flow: Flow, mode: Mode, positions: Positions,
                 identity: Callable[[], FlowIdentity]):
        self.spark = spark
        self.identity = identity
        self.flow = flow
        self.mode = mode
        self.positions = positions
        self.handle = None  # pyspark's StreamingQuery
        self._last_progress = 0.0
        self._trigger_since: float | None = None

    def start(self, source: admin.Cluster, target: admin.Cluster, topics: dict[str, int]) -> resume.Resume:
        """Starts the query; returns where it started (resume.resume, or in exactly-once mode, once every
        earlier producer of the flow is fenced, resume.resume_committed)."""
        s = self.flow.settings
        identity = None
        if s.delivery == EXACTLY_ONCE:
            identity = self.identity()
            exactly_once.fence_zombies(self.spark, self.flow, identity.transactional_prefix, self.mode.streams)
            committed = exactly_once.committed_positions(target, identity.positions_topic)
            ids = source.topic_ids(topics)
            committed.update(exactly_once.earlier_release_positions(self.spark, self.flow, source, target, topics,
                                                                    ids, committed))
            exactly_once.known_topic_ids(self.spark, ids)
            where = resume.resume_committed(s, self.flow.source_options.starting, source, topics, committed, ids)
        else:
            where = resume.resume(s, self.flow.source_options.starting, source, topics)
        self.handle = Pipeline(self.spark, self.flow).start(where.starting, self.mode, sum(topics.values()), identity)
        self._last_progress = time.monotonic()
        return where

    @property
    def run_id(self) -> str:
        return str(self.handle.runId)

    def progressed(self) -> None:
        """A batch ended (Spark's listener thread)."""
        self._last_progress = time.monotonic()

    def failure(self) -> tuple[str, str] | None:
        return failure(self.handle)

    def rate(self) -> float:
        progress = self.handle.lastProgress or {}
        return float(progress.get("processedRowsPerSecond") or 0.0)

    def running_for(self, now: float) -> float:
        """How long the work in flight has gone on past its due: a micro-batch's whole run; a real-time
        batch's time past its `checkpoint.interval.ms`."""
        if self.mode.real_time:
            due = self.flow.settings.checkpoint_interval_ms / 1e3
            return max(0.0, now - self._last_progress - due)
        if self.handle.status.get("isTriggerActive"):
            self._trigger_since = self._trigger_since or now
        else:
            self._trigger_since = None
        return 0.0 if self._trigger_since is None else now - self._trigger_since

    def stop(self, grace: float) -> bool:
        """Stop without copying anything twice if the batch in flight (micro-batch) or the records the
        producers buffered (real-time) are acknowledged within `grace` seconds; True when so. Either way the
        positions acknowledged so far are committed to the source group."""
        if self.mode.real_time:
            with quiet_task_aborts(self.spark):
                self.handle.stop()
                # The stop returns before the killed tasks end, and a task may still send until it does: the
                # producers are drained only once no task runs (seen: 0 in flight, then a record more).
                clean = settled(lambda: drained(self.spark), grace)
        else:
            clean = stop_between_batches(self.spark, self.handle, grace)
        jvm_class(self.spark, WRITER).closeAll()  # the streams' producers: what they hold delivered, syncs written
        if not flush_positions(self.spark):  # the JVM commits every 250 ms; the last ones now
            log.warning("cannot commit the last acknowledged positions to group %s now; the next start copies "
                        "what they cover again", self.flow.settings.group_id)
        totals = jvm_totals(self.spark)
        self.positions.update(jvm_positions(self.spark), _records(totals))
        return clean


def drained(spark) -> bool:
    """No task of the stopped query still runs and the target acknowledged everything its producers sent."""
    return running_tasks(spark) == 0 and in_flight(spark) == 0


def settled(condition: Callable[[], bool], grace: float, clock: Callable[[], float] = time.monotonic,
            sleep: Callable[[float], None] = time.sleep) -> bool:
    """Whether `condition` held for SETTLE seconds on end within `grace` seconds (at least SETTLE).

    Spark's count of running tasks lags its tasks: a task shows once its start went through the scheduler's
    and the listener bus's queues, and a stop that came as the query's tasks were launched saw none
    running, then one (make test: a reload 0.8 s after the query's start stopped it "cleanly", then found a
    task that could still send). A drain is trusted only once it has held for longer than those queues take."""
    deadline = clock() + max(grace, SETTLE)
    since = None
    while True:
        now = clock()
        if condition():
            since = now if since is None else since
            if now - since >= SETTLE:
                return True
        else:
            since = None
        if now >= deadline:
            return False
        sleep(DRAIN_POLL)


def _records(totals: dict) -> int:
    return sum(int(t.get("records", 0)) for t in totals.get("topics", {}).values())
