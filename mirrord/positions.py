"""Where the flow stands in the source, as the supervisor sees it: the mirrored position of every
partition, the lag behind the source's end, and records deleted before mirrord could read them (counted where
they were found gone: the JVM's streams, or a start).

The positions have one owner, in the JVM where the acknowledgements arrive
(io.mirrord.positions.Positions, docs/decisions.md §10): the acknowledged contiguous prefix of each
source partition in its current incarnation, moved by the writer's acknowledgements and by each
batch's end, and committed to the consumer group on the source by the JVM itself every 250 ms (a host
taking over, or a restart, resumes from there: resume.py). This module only reads them (`update`),
for lag, STATUS and metrics; it never commits.
"""

from __future__ import annotations

import logging
import threading
import time

from mirrord.kafka.admin import TP, Cluster
from mirrord.metrics import Metrics

log = logging.getLogger(__name__)


class Positions:
    def __init__(self, source: Cluster, group_id: str, metrics: Metrics):
        self.source = source
        self.group_id = group_id
        self.metrics = metrics
        self.flow = metrics.flow
        self._positions: dict[TP, int] = {}  # next source offset to mirror, per partition
        self._lock = threading.Lock()
        self.mirrored = 0
        self.batches = 0
        self.lost = 0
        self.lag: int | None = None
        self.topics: int | None = None

    def seed(self, topics: dict[str, int]) -> None:
        """Mirrored positions before the first batch: the group's commits (written after each batch)."""
        try:
            committed = self.source.committed(self.group_id, topics) if topics else {}
        except Exception as exc:  # noqa: BLE001 - lag is best effort until the first batch
            log.warning("cannot read group %s's offsets: %s", self.group_id, exc)
            return
        with self._lock:
            for tp, offset in committed.items():
                self._positions.setdefault(tp, offset)

    def update(self, positions: dict[TP, int], records: int) -> None:
        """The owner's positions now (io.mirrord.positions.Positions), and the records the target acknowledged."""
        with self._lock:
            self._positions.update(positions)
            self.mirrored = max(self.mirrored, records)

    def on_progress(self, progress) -> None:
        """After each batch Spark committed: its duration and time. Records deleted before they were read are
        reported by the stream whose next fetch found them gone (io.mirrord.source.StreamConsumer, `jvm_lost`), or
        at a start (spark/resume.py)."""
        if not progress.numInputRows:
            return
        with self._lock:
            self.batches += 1
        duration = (progress.durationMs or {}).get("triggerExecution", 0) / 1000.0
        self.metrics.batch_duration.labels(self.flow).observe(duration)
        self.metrics.last_commit.labels(self.flow).set(time.time())

    def report_deleted(self, lost: dict[TP, tuple[int, int]], why: str = "retention or delete-records") -> None:
        for (topic, partition), (begin, stop) in sorted(lost.items()):
            self.metrics.lost.labels(self.flow, topic).inc(stop - begin)
            with self._lock:
                self.lost += stop - begin
            log.error("%s-%d: %d records (offsets %d to %d) were deleted from the source (%s) before mirrord "
                      "read them; they are not in the target", topic, partition, stop - begin, begin, stop - 1, why)

    def update_lag(self, topics: dict[str, int]) -> None:
        """Lag from the source's log-end offsets, independent of Spark: it rises while the target is down."""
        ends = self.source.end_offsets((t, p) for t, n in topics.items() for p in range(n))
        with self._lock:
            lags = {tp: max(0, end - self._positions.get(tp, 0)) for tp, end in ends.items()}
        for (topic, partition), lag in lags.items():
            self.metrics.partition_lag.labels(self.flow, topic, str(partition)).set(lag)
        self.metrics.lag.labels(self.flow).set(sum(lags.values()))
        self.lag, self.topics = sum(lags.values()), len(topics)
