"""Prometheus metrics (docs/decisions.md §8): one registry per process, served over HTTP.

Records, bytes and latency are counted in the JVM by mirrord's writer, on whichever executor runs it,
and gathered on the driver by mirrord's Spark plugin; the daemon reads the totals every few seconds.
`BucketHistogram` exports the writer's bucket counts as they are, since a
prometheus-client Histogram can only observe one value at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, start_http_server
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from mirrord import __version__
from mirrord.errors import ConfigError
from mirrord.settings.redact import redact


class RedactedRegistry(CollectorRegistry):
    """A registry whose every label value goes through the one redaction when scraped."""

    def collect(self):
        for metric in super().collect():
            metric.samples = [s._replace(labels=redact(s.labels)) for s in metric.samples]
            yield metric


class BucketHistogram(Collector):
    def __init__(self, name: str, documentation: str, buckets: Sequence[float], flow: str):
        self.name, self.documentation, self.flow = name, documentation, flow
        self.bounds = list(buckets)
        self.counts = [0] * (len(self.bounds) + 1)  # last: above the largest bound
        self.sum = 0.0
        self._lock = threading.Lock()

    def set(self, counts: Sequence[int], total: float) -> None:
        """The cumulative bucket counts (not cumulative across buckets) and sum since the start."""
        if len(counts) != len(self.counts):
            raise ValueError(f"{self.name}: {len(counts)} buckets, expected {len(self.counts)}")
        with self._lock:
            self.counts = list(counts)
            self.sum = total

    def collect(self):
        with self._lock:
            cumulative, running = [], 0
            for bound, count in zip([*map(str, self.bounds), "+Inf"], self.counts, strict=True):
                running += count
                cumulative.append((bound, running))
            family = HistogramMetricFamily(self.name, self.documentation, labels=["flow"])
            family.add_metric([self.flow], cumulative, self.sum)
        yield family


# Upper bounds in seconds; the same as io.mirrord.metrics.Stats.BUCKETS in jvm/.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)


class Metrics:
    def __init__(self, flow: str, spark_version: str = ""):
        self.flow = flow
        self._totals: dict[str, tuple[int, int]] = {}  # topic → records, bytes already counted
        self._filtered: dict[tuple[str, str], int] = {}  # (transform, topic) → records already counted
        self._transactions: dict[str, int] = {}  # outcome → transactions already counted
        self.registry = RedactedRegistry()
        r = self.registry
        ProcessCollector(registry=r)  # process_start_time_seconds: restarts on the dashboard and in alerts
        self.records = Counter("mirrord_records", "Records written to the target", ["flow", "topic"], registry=r)
        self.bytes = Counter("mirrord_bytes", "Key and value bytes written to the target", ["flow", "topic"],
                             registry=r)
        self.partition_lag = Gauge("mirrord_partition_lag", "Source log-end offset minus mirrored offset",
                                   ["flow", "topic", "partition"], registry=r)
        self.lag = Gauge("mirrord_lag_records", "Records in the source not yet mirrored, all partitions",
                         ["flow"], registry=r)
        self.latency = BucketHistogram("mirrord_replication_latency_seconds",
                                       "Acknowledgement by the target minus the record's timestamp",
                                       LATENCY_BUCKETS, flow)
        r.register(self.latency)
        self.batch_duration = Histogram("mirrord_batch_duration_seconds", "Duration of a mirrored micro-batch",
                                        ["flow"], registry=r,
                                        buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
        self.task_duration = Histogram("mirrord_task_duration_seconds", "Duration of a periodic job's run",
                                       ["flow", "task"], registry=r,
                                       buckets=(0.005, 0.025, 0.1, 0.5, 1, 5, 30, 120))
        self.last_checkpoint = Gauge("mirrord_last_checkpoint_timestamp_seconds", "End of the last round that "
                                     "wrote every group's checkpoints (Unix seconds)", ["flow"], registry=r)
        self.heartbeat_age = Gauge("mirrord_heartbeat_age_seconds", "Now minus the newest heartbeat that came through "
                                   "the flow from the source's `heartbeats` topic: end-to-end liveness",
                                   ["flow"], registry=r)
        self.cycle = Gauge("mirrord_cycle_detected", "1 once this flow's own heartbeats came back to the source "
                           "(identity policy both ways: records loop)", ["flow"], registry=r)
        self.config_refused = Counter("mirrord_topic_configs_refused", "Target topics created without their source "
                                      "topic's configs because the target refused them", ["flow", "topic"], registry=r)
        self.lost = Counter("mirrord_records_lost", "Source records deleted (retention, delete-records, the "
                            "topic deleted) before mirrord read them, so never mirrored", ["flow", "topic"], registry=r)
        self.filtered = Counter("mirrord_records_filtered", "Source records a transform's filter or sample dropped "
                                "(not written to the target)", ["flow", "topic", "transform"], registry=r)
        self.errors = Counter("mirrord_errors", "Errors by kind", ["flow", "kind"], registry=r)
        self.last_commit = Gauge("mirrord_last_commit_timestamp_seconds",
                                 "Time of the last committed batch (Unix seconds)", ["flow"], registry=r)
        self.cluster_up = Gauge("mirrord_cluster_up", "1 while the cluster answers mirrord's probes",
                                ["flow", "cluster"], registry=r)
        self.active = Gauge("mirrord_active", "1 on the flow's active host, 0 on a standby (leader.election.enabled)",
                            ["flow"], registry=r)
        self.up = Gauge("mirrord_up", "1 while mirroring: the streaming query runs, is healthy and both clusters "
                        "answer", ["flow"], registry=r)
        self.mode = Gauge("mirrord_mode", "1 for the trigger mode the streaming query runs in (real-time or "
                          "micro-batch), 0 for the other", ["flow", "mode"], registry=r)
        self.delivery = Gauge("mirrord_delivery", "1 for the delivery the flow runs with (at-least-once or "
                              "exactly-once, docs/decisions.md §12), 0 for the other", ["flow", "delivery"], registry=r)
        self.transactions = Counter("mirrord_transactions", "exactly once: the streams' transactions on the target, "
                                    "committed or aborted (docs/decisions.md §12)", ["flow", "outcome"], registry=r)
        self.transaction_seconds = BucketHistogram(
            "mirrord_transaction_seconds", "exactly once: a committed transaction's length, from its first record to "
            "its commit's end (what a read_committed consumer may wait for a record beyond its copy; "
            "docs/decisions.md §12)", LATENCY_BUCKETS, flow)
        self.commit_seconds = BucketHistogram(
            "mirrord_transaction_commit_seconds", "exactly once: a commit's time, its records' drain and the "
            "coordinator's answer (the stream's sends wait for it)", LATENCY_BUCKETS, flow)
        r.register(self.transaction_seconds)
        r.register(self.commit_seconds)
        self.state = Gauge("mirrord_state", "1 for the supervisor's state (starting, waiting, standby, mirroring, "
                           "outage, retrying, stopping, fenced, failed: docs/decisions.md §11), 0 for the others",
                           ["flow", "state"], registry=r)
        self.build = Gauge("mirrord_build_info", "Build information", ["version", "spark_version"], registry=r)
        self.build.labels(__version__, spark_version).set(1)
        self.up.labels(flow).set(0)
        self.lag.labels(flow).set(0)
        self.last_commit.labels(flow)
        self.cycle.labels(flow).set(0)
        for kind in ("delivery", "timeout", "lapsed", "deleted", "executor", "query", "commit", "lag", "progress"):
            self.errors.labels(flow, kind)

    def set_totals(self, topics: dict[str, dict], latency: dict) -> None:
        """Cumulative counts from the JVM: counters move by what is new since the last call."""
        for topic, counts in topics.items():
            records, size = int(counts.get("records", 0)), int(counts.get("bytes", 0))
            seen_records, seen_bytes = self._totals.get(topic, (0, 0))
            self.records.labels(self.flow, topic).inc(max(0, records - seen_records))
            self.bytes.labels(self.flow, topic).inc(max(0, size - seen_bytes))
            self.lost.labels(self.flow, topic)  # a zero series, so dashboards and alerts see the topic
            self._totals[topic] = (max(records, seen_records), max(size, seen_bytes))
        if latency.get("counts"):
            self.latency.set([int(c) for c in latency["counts"]], float(latency.get("sum", 0.0)))

    def set_filtered(self, filtered: dict[str, dict[str, int]]) -> None:
        """Cumulative drops from the JVM, transform → source topic → records."""
        for transform, topics in filtered.items():
            for topic, count in topics.items():
                seen = self._filtered.get((transform, topic), 0)
                self.filtered.labels(self.flow, topic, transform).inc(max(0, int(count) - seen))
                self._filtered[(transform, topic)] = max(int(count), seen)

    def set_transactions(self, counts: dict[str, int], lasted: dict, commits: dict) -> None:
        """Cumulative transaction outcomes from the JVM (committed, aborted), and the committed ones' lengths and
        commit times (histograms as the latency's)."""
        for outcome, count in counts.items():
            seen = self._transactions.get(outcome, 0)
            self.transactions.labels(self.flow, outcome).inc(max(0, int(count) - seen))
            self._transactions[outcome] = max(int(count), seen)
        for histogram, counted in ((self.transaction_seconds, lasted), (self.commit_seconds, commits)):
            if counted.get("counts"):
                histogram.set([int(c) for c in counted["counts"]], float(counted.get("sum", 0.0)))

    def error(self, kind: str) -> None:
        self.errors.labels(self.flow, kind).inc()

    def serve(self, listen: tuple[str, int] | None, origin: str) -> None:
        if listen is None:
            return
        host, port = listen
        try:
            start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise ConfigError(origin, "metrics.listen", f"cannot listen on {host}:{port}: {exc.strerror}") from None
