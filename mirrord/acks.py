"""What the target acknowledged, brought from the JVM every half second: counts and positions.

mirrord's writer counts records, bytes and latency per target topic; the metrics plugin gathers
them on the driver, where the positions' owner (io.mirrord.positions.Positions) also holds each source
partition's acknowledged position and commits it to the source group itself. Every half second the
counts become the Prometheus counters and the acknowledged rate in STATUS, and the positions are read
for lag and STATUS (positions.Positions); every few seconds the lag behind the source's end is measured.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from mirrord.metrics import Metrics
from mirrord.positions import Positions
from mirrord.spark.session import jvm_lost, jvm_positions, jvm_totals

log = logging.getLogger(__name__)
EVERY = 0.5  # the target's acknowledgements become the group's offsets within this
LAG_EVERY = 5.0


class Acknowledgements:
    def __init__(self, spark, positions: Positions, metrics: Metrics, target_prefix: Callable[[], str],
                 topics: Callable[[], dict[str, int]], source_up: Callable[[], bool]):
        self.spark = spark
        self.positions = positions
        self.metrics = metrics
        self.target_prefix = target_prefix  # the replication policy's, which a reload may change
        self.topics = topics
        self.source_up = source_up
        self.rate = 0.0

    def start(self, stop: threading.Event) -> None:
        threading.Thread(target=self._loop, args=(stop,), name="acks", daemon=True).start()

    def _loop(self, stop: threading.Event) -> None:
        next_lag = 0.0
        last = (time.monotonic(), 0)
        while not stop.wait(EVERY):
            if not self.source_up():
                continue  # the last values stay, and the outage has its own metric
            records = self.read()
            now = time.monotonic()
            if records is not None:
                self.rate = max(0.0, (records - last[1]) / max(now - last[0], 1e-3))
                last = (now, records)
            if now < next_lag:
                continue
            next_lag = now + LAG_EVERY
            try:
                self.positions.update_lag(self.topics())
            except Exception as exc:  # noqa: BLE001 - source unreachable: keep the last values
                self.metrics.error("lag")
                log.debug("lag check failed: %s", exc)

    def read(self) -> int | None:
        """Counts and positions from the JVM (per target topic, reported under the source topic's name, as
        lag is); the records acknowledged in all, or None when the JVM does not answer."""
        try:
            totals = jvm_totals(self.spark)
            positions = jvm_positions(self.spark)
            lost = jvm_lost(self.spark)
        except Exception as exc:  # noqa: BLE001 - the JVM is restarting or gone: the supervisor sees it
            log.debug("cannot read the writers' counts: %s", exc)
            return None
        prefix = self.target_prefix()
        topics = totals.get("topics", {})
        self.metrics.set_totals({t.removeprefix(prefix): v for t, v in topics.items()}, totals.get("latency", {}))
        self.metrics.set_filtered(totals.get("filtered", {}))
        self.metrics.set_transactions(totals.get("transactions", {}), totals.get("transaction_seconds", {}),
                                      totals.get("commit_seconds", {}))
        records = sum(int(t.get("records", 0)) for t in topics.values())
        self.positions.update(positions, records)
        for gap, why in lost:
            self.positions.report_deleted(gap, why)
        return records
