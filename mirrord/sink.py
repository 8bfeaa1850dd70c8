"""The target side of the data path: runs inside Spark's Python workers, one call per Spark task.

Spark's Kafka source gives one task per source partition range, in offset order; `ProduceTask`
writes its rows with a confluent-kafka producer to the same partition number of the target topic,
keeping key, value, headers (order, repeats, binary values) and the timestamp. It returns one
summary row per partition: counts, bytes, the exact target offsets of the first and last record
(the offset syncs), and latency buckets. The task raises if any record was not acknowledged, so
Spark fails the batch and it is never committed: at-least-once.

Why not Spark's own Kafka sink: in Spark 4.0 it has no timestamp column (docs/decisions.md).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from mirrord.errors import DeliveryError
from mirrord.policy import Policy

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)

SUMMARY_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("records", pa.int64()),
    ("bytes", pa.int64()),
    ("first_offset", pa.int64()),
    ("last_offset", pa.int64()),
    ("first_target_offset", pa.int64()),
    ("last_target_offset", pa.int64()),
    ("latency_sum", pa.float64()),
    ("latency_buckets", pa.list_(pa.int64())),
])
SUMMARY_DDL = ", ".join([
    "topic string", "partition int", "records long", "bytes long", "first_offset long", "last_offset long",
    "first_target_offset long", "last_target_offset long", "latency_sum double", "latency_buckets array<long>",
])

_producers: dict[tuple, object] = {}


def _producer(settings: tuple):
    """One producer per Python worker and settings, kept across tasks (workers are reused)."""
    from confluent_kafka import Producer

    producer = _producers.get(settings)
    if producer is None:
        producer = _producers[settings] = Producer(dict(settings))
    return producer


@dataclass
class _Partition:
    source_topic: str
    partition: int
    records: int = 0
    bytes: int = 0
    first_offset: int = -1
    last_offset: int = -1
    delivered: int = 0
    first_target: int = -1
    last_target: int = -1
    latency_sum: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    errors: list[str] = field(default_factory=list)

    def on_delivery(self, err, msg) -> None:
        if err is not None:
            if len(self.errors) < 5:
                self.errors.append(str(err))
            return
        offset = msg.offset()
        self.delivered += 1
        if self.first_target < 0 or offset < self.first_target:
            self.first_target = offset
        if offset > self.last_target:
            self.last_target = offset
        latency = max(0.0, time.time() - msg.timestamp()[1] / 1000.0)
        self.latency_sum += latency
        self.buckets[bisect.bisect_left(LATENCY_BUCKETS, latency)] += 1


@dataclass(frozen=True)
class ProduceTask:
    """Picklable: Spark ships it to the workers. `settings` is the librdkafka producer config."""

    settings: tuple[tuple[str, str], ...]
    policy: Policy

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        producer = _producer(self.settings)
        parts: dict[tuple[str, int], _Partition] = {}
        for batch in batches:
            if batch.num_rows:
                self._produce(producer, batch, parts)
        while len(producer) > 0:
            producer.flush(1.0)
        failed = [p for p in parts.values() if p.errors or p.delivered != p.records]
        if failed:
            p = failed[0]
            raise DeliveryError(
                f"{p.source_topic}-{p.partition}: {p.records - p.delivered} of {p.records} records not "
                f"acknowledged by the target: {'; '.join(p.errors) or 'no delivery report'}"
            )
        if parts:
            yield pa.RecordBatch.from_pylist([self._summary(p) for p in parts.values()], schema=SUMMARY_SCHEMA)

    def _produce(self, producer, batch: pa.RecordBatch, parts: dict) -> None:
        def column(name: str) -> list:
            return batch.column(name).to_pylist()

        timestamps = batch.column("timestamp").cast(pa.int64()).to_pylist()  # microseconds
        produce = producer.produce
        target_topics: dict[str, str] = {}
        for topic, partition, offset, key, value, ts, headers in zip(
            column("topic"), column("partition"), column("offset"), column("key"), column("value"),
            timestamps, column("headers"), strict=True,
        ):
            part = parts.get((topic, partition))
            if part is None:
                part = parts[(topic, partition)] = _Partition(topic, partition, first_offset=offset)
            part.records += 1
            part.last_offset = offset
            part.bytes += (len(key) if key else 0) + (len(value) if value else 0)
            target = target_topics.get(topic) or target_topics.setdefault(topic, self.policy.target_topic(topic))
            kwargs = {
                "key": key, "value": value, "partition": partition, "timestamp": ts // 1000,
                "headers": [(h["key"], h["value"]) for h in headers] if headers else None,
                "on_delivery": part.on_delivery,
            }
            while True:
                try:
                    produce(target, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)  # queue full: serve delivery reports, then retry
            if part.records % 1000 == 0:
                producer.poll(0)

    @staticmethod
    def _summary(p: _Partition) -> dict:
        return {
            "topic": p.source_topic, "partition": p.partition, "records": p.records, "bytes": p.bytes,
            "first_offset": p.first_offset, "last_offset": p.last_offset,
            "first_target_offset": p.first_target, "last_target_offset": p.last_target,
            "latency_sum": p.latency_sum, "latency_buckets": p.buckets,
        }
