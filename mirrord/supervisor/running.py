"""The streaming query on the active host: started in the mode that fits, watched, stopped copying nothing twice.

`Mirroring` owns at most one query.Query at a time. A start creates the target topics the query will
write, picks the trigger mode and the streams for the task slots (modes.py; Spark's refusal of real-time
mode falls back to micro-batch), resumes past what a failed query's producers delivered, and holds the
lease while the query runs. The topics job keeps the target topics ahead of the source. A stop waits, up
to a grace, for the batch in flight (micro-batch) or the buffered records (real-time) to be acknowledged,
so nothing is copied twice; while a cluster is away it cuts at once.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable

from mirrord.fencing import Lease
from mirrord.identity import FlowIdentity
from mirrord.kafka import admin
from mirrord.metrics import Metrics
from mirrord.mm2.checkpoints import GroupTranslation
from mirrord.positions import Positions
from mirrord.settings.flow import Flow
from mirrord.settings.keys import AT_LEAST_ONCE, EXACTLY_ONCE
from mirrord.spark import exactly_once, modes
from mirrord.spark.pipeline import Pipeline
from mirrord.spark.query import Query, TargetTopics
from mirrord.spark.session import (
    default_parallelism,
    flush_positions,
    jvm_class,
    one_line,
    quiet_task_aborts,
    running_tasks,
    warm_producer,
)
from mirrord.supervisor.health import ClusterWatch

log = logging.getLogger("mirrord")
DELIVERIES = (AT_LEAST_ONCE, EXACTLY_ONCE)
STOP_GRACE = 60.0  # for the batch in flight to commit; TimeoutStopSec is 90
REHEARSAL_MAX = 60.0  # seconds a standby's rehearsal may take (its tasks running, or micro-batch's query started)
REHEARSAL_TASKS = 1.0  # seconds its tasks run before it stops: they compile the plan's code as they start


class Mirroring:
    def __init__(self, spark, flow: Flow, master: str, source: admin.Cluster, target: admin.Cluster,
                 positions: Positions, metrics: Metrics, clusters: ClusterWatch, translation: GroupTranslation,
                 lease: Lease | None, identity: Callable[[], FlowIdentity]):
        self.spark = spark
        self.flow = flow  # replaced by a reload
        self.master = master
        self.source = source
        self.target = target
        self.positions = positions
        self.metrics = metrics
        self.clusters = clusters
        self.translation = translation
        self.lease = lease
        self.identity = identity  # the flow's names on the target (mirrord/identity.py)
        self.mode: modes.Mode | None = None
        self.query: Query | None = None
        self._target_topics: TargetTopics | None = None
        self._rehearsal: threading.Thread | None = None
        self._rehearsed = threading.Event()  # set: the rehearsal is over, or a start cuts it short
        self._started = False  # a query was started in this JVM

    @property
    def running(self) -> bool:
        return self.query is not None

    def topics(self) -> dict[str, int]:
        """The source topics the flow mirrors now, with their partition counts."""
        return self.source.partitions(self.flow.pattern)

    def rehearse(self) -> None:
        """While this host stands by, once: the query started over no topic and stopped (Pipeline.rehearse), in a
        thread of its own, so that a take-over starts it in a JVM that has run it (its classes loaded, its plan's
        code compiled: 4.5 s of a take-over's 6 s in a cold JVM, measured)."""
        if self._rehearsal is None and not self._started:  # a JVM that ran the query needs no rehearsal
            self._rehearsal = threading.Thread(target=self._rehearse, name="rehearsal", daemon=True)
            self._rehearsal.start()

    def _rehearse(self) -> None:
        began = time.monotonic()
        mode = self._choose()
        try:
            with tempfile.TemporaryDirectory(prefix="rehearsal-", dir=self.flow.settings.state_dir) as checkpoint:
                handle = Pipeline(self.spark, self.flow).rehearse(mode, checkpoint)
                try:
                    running = None
                    while not self._rehearsed.wait(0.1) and time.monotonic() - began < REHEARSAL_MAX:
                        if not mode.real_time or running_tasks(self.spark) >= mode.streams:
                            running = running or time.monotonic()
                            if time.monotonic() - running >= REHEARSAL_TASKS:
                                break
                finally:
                    with quiet_task_aborts(self.spark):
                        handle.stop()
            if not self._rehearsed.is_set():
                warm_producer(self.spark, self.flow)
            log.info("rehearsed the query's start over no topic (%.1fs): a take-over starts it in a warm JVM",
                     time.monotonic() - began)
        except Exception as exc:  # noqa: BLE001 - only the take-over's speed depends on it; SIGTERM stops Spark
            log.debug("the query's rehearsal stopped: %s", one_line(str(exc)))
        finally:
            self._rehearsed.set()

    def start(self) -> None:
        flow = self.flow
        self._started = True
        if self._rehearsal is not None:  # cut short: its query holds task slots the real one needs
            self._rehearsed.set()
            self._rehearsal.join()
        self.translation.prepare()  # the offset-syncs topic, before the writer writes to it
        if flow.settings.delivery == EXACTLY_ONCE:
            exactly_once.ensure_positions_topic(self.target, self.identity().positions_topic)
        for name in DELIVERIES:
            self.metrics.delivery.labels(flow.name, name).set(1 if name == flow.settings.delivery else 0)
        self._target_topics = TargetTopics(
            flow, self.source, self.target, lambda topic: self.metrics.config_refused.labels(flow.name, topic).inc(),
            lambda ready: jvm_class(self.spark, "io.mirrord.source.TargetCopies").exist(ready))
        topics = self.topics()
        self.ensure_target_topics(topics)
        mode = self._choose()
        self._set_mode(mode)
        self.positions.seed(topics)
        flush_positions(self.spark)  # what a failed query's producers delivered: the start resumes past it
        if self.lease is not None:
            self.lease.hold()  # before the query sends anything (docs/decisions.md §6)
        query = Query(self.spark, flow, mode, self.positions, self.identity)
        try:
            where = query.start(self.source, self.target, topics)
        except Exception as exc:  # noqa: BLE001 - py4j wraps Spark's refusal
            refusal = one_line(str(exc))
            if not (mode.real_time and "STREAMING_REAL_TIME_MODE" in refusal):
                raise
            self._set_mode(modes.Mode(modes.MICRO_BATCH, f"Spark refused real-time mode: {refusal}", mode.streams))
            query = Query(self.spark, flow, self.mode, self.positions, self.identity)
            where = query.start(self.source, self.target, topics)
        self.positions.report_deleted(where.lost)
        self.query = query
        self.metrics.up.labels(flow.name).set(1)

    def _slots(self) -> int:
        return modes.master_slots(self.master, os.cpu_count() or 1) or default_parallelism(self.spark)

    def _choose(self) -> modes.Mode:
        """The one place the trigger mode and the streams are decided (modes.py)."""
        slots = self._slots()
        local = modes.master_slots(self.master, 1) is not None
        streams = modes.default_streams(self.flow.settings.num_streams, os.cpu_count() or 1,
                                        None if local else slots)
        return modes.choose(self.flow.settings.trigger, streams, slots)

    def _set_mode(self, mode: modes.Mode) -> None:
        if mode != self.mode:
            log.info("%s mode: %s", mode.name, mode.reason)
            self.mode = mode
            for name in (modes.REAL_TIME, modes.MICRO_BATCH):
                self.metrics.mode.labels(self.flow.name, name).set(1 if name == mode.name else 0)

    def ensure_target_topics(self, topics: dict[str, int]) -> int:
        """Every source topic has its copy in the target."""
        self._target_topics.ensure(topics)
        return 0

    def failure(self) -> tuple[str, str] | None:
        """(kind, one line) once the running query failed; None while it runs or cannot be asked."""
        if self.query is None:
            return None
        try:
            return self.query.failure()
        except Exception as exc:  # noqa: BLE001 - the JVM does not answer: the watchdog decides
            log.debug("cannot ask the query how it is: %s", exc)
            return None

    def overdue(self, now: float) -> float | None:
        """How long the work in flight is overdue (query.Query.running_for) while both clusters answered (a
        batch waiting for an unreachable cluster is not stuck); None between queries; raises if the JVM is gone."""
        query = self.query
        if query is None:
            jvm_class(self.spark, "java.lang.System").nanoTime()  # JVM alive, between queries
            return None
        return min(query.running_for(now), self.clusters.up_for())

    def forget(self) -> None:  # the query failed and is gone: the next start makes a new one
        self.query = None

    def on_progress(self, progress) -> None:
        """After each batch Spark committed (its listener thread), for the query that runs now."""
        try:
            query = self.query
            if query is None or str(progress.runId) != query.run_id or not progress.sources:
                return
            query.progressed()
            self.positions.on_progress(progress)
        except Exception as exc:  # noqa: BLE001 - a listener error must not stop Spark's event bus
            self.metrics.error("progress")
            log.warning("cannot process the progress of batch %s: %s", getattr(progress, "batchId", "?"), exc)

    def stop(self, keep_alive: Callable[[], None], grace: float = STOP_GRACE) -> None:
        """Stop the query without copying anything twice when its batch (micro-batch) or its buffered records
        (real-time) are acknowledged within `grace`; while a cluster is away that may never happen, so it
        is cut at once (the records in flight are copied again: at least once). `keep_alive` is called
        while the stop waits (the systemd watchdog: waiting for acknowledgements is not a stall)."""
        query, self.query = self.query, None
        if query is None:
            return
        self.metrics.up.labels(self.flow.name).set(0)
        if not self.clusters.all_up():
            grace = 0.0
        outcome: dict[str, object] = {}

        def stop() -> None:
            try:
                outcome["clean"] = query.stop(grace)
            except Exception as exc:  # noqa: BLE001 - JVM already gone: nothing to finish; the checkpoint replays
                outcome["error"] = exc

        stopper = threading.Thread(target=stop, name="stop-query", daemon=True)
        stopper.start()
        while stopper.is_alive():
            keep_alive()
            stopper.join(0.2)
        if self.lease is not None:
            try:
                self.lease.release()
            except Exception as exc:  # noqa: BLE001 - the JVM is gone: nothing left to fence
                log.debug("cannot release the lease: %s", exc)
        if "error" in outcome:
            log.warning("streaming query did not stop cleanly: %s", one_line(str(outcome["error"])))
        elif outcome.get("clean"):
            log.info("streaming query stopped cleanly: nothing it sent will be copied again")
        else:
            log.warning("streaming query stopped with records unacknowledged (%s): they are copied again at the "
                        "next start", "a cluster is unreachable" if grace == 0 else
                        f"not acknowledged within {grace:.0f}s")
