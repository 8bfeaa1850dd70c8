"""Produce and read records with every field a mirror must keep, and wait for conditions."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from mirrord.kafka.admin import retrying

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class Record:
    """A record as the user would compare it between clusters."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp: int
    timestamp_type: int

    def fields(self) -> tuple:
        """Everything but the offset and topic name, which a mirror may legitimately change."""
        return (self.partition, self.key, self.value, self.headers, self.timestamp)


def wait_until(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result()
    wait_until(lambda: name in metadata(admin, timeout=5).topics, 30, f"topic {name}")


def metadata(admin: AdminClient, topic: str | None = None, timeout: float = 10):
    """The cluster's metadata (one topic's if named), asked again while no broker answers: a broker the test has
    just restarted, or a loaded machine, refuses the first connection ("Broker transport failure")."""
    return retrying(lambda: admin.list_topics(topic, timeout=timeout))


def topic_partitions(bootstrap: str, name: str) -> int:
    md = metadata(AdminClient({"bootstrap.servers": bootstrap}), name)
    return len(md.topics[name].partitions) if name in md.topics and md.topics[name].error is None else 0


def producer(bootstrap: str, **extra) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, **extra})


def produce(bootstrap: str, topic: str, records: list[dict], config: dict[str, str] | None = None) -> None:
    """Each dict: partition, key, value, headers (list of tuples), timestamp (ms); `config`: more producer
    settings (compression.type, security.protocol, ...)."""
    p = producer(bootstrap, **(config or {}))
    errors = []
    for r in records:
        while True:
            try:
                p.produce(topic, key=r.get("key"), value=r.get("value"), partition=r["partition"],
                          headers=r.get("headers"), timestamp=r.get("timestamp", 0),
                          on_delivery=lambda err, msg: err and errors.append(err))
                break
            except BufferError:  # more records than the producer queues: wait for deliveries
                p.poll(0.5)
        p.poll(0)
    assert p.flush(60) == 0, "records not delivered to the source"
    assert not errors, errors


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's end offset (high watermark); {} if the topic is absent. One admin client asks the
    partitions' leaders all at once: the tests poll this several times a second while they wait (librdkafka's
    informational line as each one closes, "Purging 1 unserved events", is left out: `make demo` prints its counts)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 5})
    found = metadata(admin, topic).topics.get(topic)
    if found is None or found.error is not None:
        return {}
    wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in found.partitions}
    return retrying(lambda: {tp.partition: future.result().offset
                             for tp, future in admin.list_offsets(wanted, request_timeout=10).items()})


def read_all(bootstrap: str, topic: str, timeout: float = 30) -> dict[int, list[Record]]:
    """Every record of every partition, up to the end offsets seen at the call."""
    ends = end_offsets(bootstrap, topic)
    out: dict[int, list[Record]] = {p: [] for p in ends}
    wanted = {p: e for p, e in ends.items() if e > 0}
    if not wanted:
        return out
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in wanted])
        deadline = time.monotonic() + timeout
        done: set[int] = set()
        while len(done) < len(wanted):
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read {topic} to its end offsets {wanted}")
            for msg in c.consume(1000, timeout=1):
                if msg.error():
                    continue
                p = msg.partition()
                ts_type, ts = msg.timestamp()
                out[p].append(Record(topic, p, msg.offset(), msg.key(), msg.value(),
                                     tuple(msg.headers() or ()), ts, ts_type))
                if msg.offset() + 1 >= wanted[p]:
                    done.add(p)
    finally:
        c.close()
    return out


def read_committed(bootstrap: str, topic: str, timeout: float = 60) -> dict[int, list[Record]]:
    """Every committed record of every partition, as a consumer with isolation.level=read_committed reads
    them (aborted transactions' records and the transactions' markers left out), up to each partition's
    last stable offset."""
    n = topic_partitions(bootstrap, topic)
    out: dict[int, list[Record]] = {p: [] for p in range(n)}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(n)])
        deadline = time.monotonic() + timeout
        done: set[int] = set()
        while len(done) < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read {topic} to its last stable offsets")
            for msg in c.consume(1000, timeout=1):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        done.add(msg.partition())
                    continue
                ts_type, ts = msg.timestamp()
                out[msg.partition()].append(Record(topic, msg.partition(), msg.offset(), msg.key(), msg.value(),
                                                   tuple(msg.headers() or ()), ts, ts_type))
    finally:
        c.close()
    return out


def count(bootstrap: str, topic: str) -> int:
    """Records in a topic (end offsets: no compaction or transactions in these tests); 0 if absent."""
    return sum(end_offsets(bootstrap, topic).values())


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        n = topic_partitions(bootstrap, topic)
        tps = retrying(lambda: c.committed([TopicPartition(topic, p) for p in range(n)], timeout=10))
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
    finally:
        c.close()


def commit_offsets(bootstrap: str, group: str, topic: str, offsets: dict[int, int],
                   metadata: str | None = None) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        extra = {} if metadata is None else {"metadata": metadata}
        c.commit(offsets=[TopicPartition(topic, p, o, **extra) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


class Trickle:
    """Produces `total` numbered records at about `rate` per second, round-robin over partitions, in a thread.

    Its producer lingers 50 ms, as a busy production producer batches: with 5 ms, a request of a record or two
    each, both brokers, mirrord (real-time mode) and this producer spent 1.1 cores between them on a 2,000
    records/s stream, against 0.5."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, total: int, rate: float):
        import threading

        self.bootstrap, self.topic, self.partitions, self.total, self.rate = bootstrap, topic, partitions, total, rate
        self.sent = 0
        self.errors: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Trickle:
        self._thread.start()
        return self

    def _run(self) -> None:
        p = producer(self.bootstrap, **{"linger.ms": 50})
        started = time.monotonic()
        for i in range(self.total):
            if self._stop.is_set():
                break
            p.produce(self.topic, key=f"k{i}".encode(), value=f"seq-{i}".encode(), partition=i % self.partitions,
                      headers=[("seq", str(i).encode())],
                      on_delivery=lambda err, msg: err and self.errors.append(err))
            self.sent += 1
            p.poll(0)
            ahead = (i + 1) / self.rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
        p.flush(60)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float = 120) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "producer still running"
        assert not self.errors, self.errors[:3]

    def stop(self) -> None:
        """Stop sending and wait for the producer to flush and close (before its brokers go away)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(30)
