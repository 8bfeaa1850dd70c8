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
import pyarrow.compute as pc

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


class _Clock:
    """One clock read per poll, shared by every partition of a task: poll() serves all their reports."""

    now = 0.0

    def tick(self) -> None:
        self.now = time.time()


@dataclass
class _Partition:
    source_topic: str
    partition: int
    target_topic: str
    clock: _Clock
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
        """Runs once per record, inside poll()/flush(): kept to the minimum. Reports of one partition
        come in offset order, so the first and the latest report are the first and last offsets."""
        if err is not None:
            if len(self.errors) < 5:
                self.errors.append(str(err))
            return
        self.delivered += 1
        self.last_target = msg.offset()
        if self.first_target < 0:
            self.first_target = self.last_target
        latency = self.clock.now - msg.timestamp()[1] / 1000.0
        if latency < 0.0:  # a timestamp in the future (clock skew): count it as no delay
            latency = 0.0
        self.latency_sum += latency
        self.buckets[bisect.bisect_left(LATENCY_BUCKETS, latency)] += 1


def _runs(batch: pa.RecordBatch) -> Iterator[tuple[str, int, pa.RecordBatch]]:
    """The batch cut where (topic, partition) changes: zero-copy slices, order kept. A task writes
    the partitions Spark coalesced into it one after the other."""
    topics, partitions, n = batch.column("topic"), batch.column("partition"), batch.num_rows
    changed = pc.or_(pc.not_equal(topics.slice(1), topics.slice(0, n - 1)),
                     pc.not_equal(partitions.slice(1), partitions.slice(0, n - 1)))
    starts = [0, *(i + 1 for i in pc.indices_nonzero(changed).to_pylist()), n]
    for a, b in zip(starts, starts[1:], strict=False):
        yield topics[a].as_py(), partitions[a].as_py(), batch.slice(a, b - a)


def _headers(column: pa.Array) -> list:
    """Kafka headers as confluent-kafka takes them: [(key, value), ...] in order, or None."""
    if pc.max(pc.list_value_length(column)).as_py() in (None, 0):
        return [None] * len(column)
    return [[(h["key"], h["value"]) for h in row] if row else None for row in column.to_pylist()]


def _produce_when_room(producer, clock: _Clock, args: tuple) -> None:
    """The producer's queue is full: serve delivery reports until it takes the record."""
    while True:
        clock.tick()
        producer.poll(0.05)
        try:
            producer.produce(*args)
            return
        except BufferError:
            continue


@dataclass(frozen=True)
class ProduceTask:
    """Picklable: Spark ships it to the workers. `settings` is the librdkafka producer config."""

    settings: tuple[tuple[str, str], ...]
    policy: Policy

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        producer = _producer(self.settings)
        clock = _Clock()
        parts: dict[tuple[str, int], _Partition] = {}
        for batch in batches:
            for topic, partition, run in _runs(batch) if batch.num_rows else ():
                part = parts.get((topic, partition))
                if part is None:
                    part = parts[(topic, partition)] = _Partition(
                        topic, partition, self.policy.target_topic(topic), clock)
                self._produce(producer, run, part)
        while len(producer) > 0:
            clock.tick()
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

    @staticmethod
    def _produce(producer, run: pa.RecordBatch, part: _Partition) -> None:
        """One partition's rows, in order. produce() takes its arguments by position:
        topic, value, key, partition, on_delivery, callback, timestamp (ms), headers."""
        offsets = run.column("offset")
        if part.first_offset < 0:
            part.first_offset = offsets[0].as_py()
        part.last_offset = offsets[-1].as_py()
        part.records += len(run)
        keys, values = run.column("key"), run.column("value")
        part.bytes += sum(pc.sum(pc.binary_length(c)).as_py() or 0 for c in (keys, values))
        millis = pc.divide(run.column("timestamp").cast(pa.int64()), 1000)  # Spark gives microseconds
        produce, topic, partition, callback = producer.produce, part.target_topic, part.partition, part.on_delivery
        rows = zip(values.to_pylist(), keys.to_pylist(), millis.to_pylist(), _headers(run.column("headers")),
                   strict=True)
        for i, (value, key, ts, headers) in enumerate(rows):
            args = (topic, value, key, partition, callback, None, ts, headers)
            try:
                produce(*args)
            except BufferError:
                _produce_when_room(producer, part.clock, args)
            if i % 1000 == 999:
                part.clock.tick()
                producer.poll(0)

    @staticmethod
    def _summary(p: _Partition) -> dict:
        return {
            "topic": p.source_topic, "partition": p.partition, "records": p.records, "bytes": p.bytes,
            "first_offset": p.first_offset, "last_offset": p.last_offset,
            "first_target_offset": p.first_target, "last_target_offset": p.last_target,
            "latency_sum": p.latency_sum, "latency_buckets": p.buckets,
        }
