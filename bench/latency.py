"""The steady-stream workload: a paced producer into the source and a timing consumer on the target.

Each value starts with the send time (ns since the epoch, 20 ASCII digits), a phase letter and a
sequence number, then padding: ASCII only and newline-free, so even a line-based pipe (kcat)
carries it intact, and the latency does not depend on a contender keeping record timestamps.
The records go round robin over every partition of every topic (bench.shape.slots). Late topics
(`--late-topics`) are created by the producer itself, `--late-at` seconds after it started (on the
`--create-on` clusters first: the target, for a contender that does not create its topics; then the
source), and join the round robin once the source has them; the consumer looks for them on the target
every LATE_LOOK seconds and reads each from its start, so their records are timed as the others are
(the look adds at most LATE_LOOK to the first ones).
Run as `python -m bench.latency produce|consume ...`; each prints one JSON line at the end.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.shape import slots

LATE_LOOK = 0.25  # seconds between the consumer's looks for late topics on the target
# One measured record in ACK_SAMPLE is timed from its send to the source's acknowledgement: the part of every
# contender's latency that is the bench producer's and the source broker's, before any mirror can fetch it.
ACK_SAMPLE = 16
PRODUCE_LINGER_MS = 5
CONSUME_BATCH = 10_000  # records the timing consumer takes at once from what librdkafka fetched
HEAD = 33  # 20 digits of send time, 1 phase letter, 12 digits of sequence number
PROBE, WARMUP, MEASURED, COOLDOWN = "P", "W", "M", "C"


def encode(send_ns: int, phase: str, seq: int, size: int) -> bytes:
    head = b"%020d%s%012d" % (send_ns, phase.encode(), seq)
    return head + b"x" * max(0, size - HEAD)


def decode(value: bytes) -> tuple[int, str, int]:
    return int(value[:20]), chr(value[20]), int(value[21:33])


def create_topics(bootstrap: str, topics: list[str], partitions: int, timeout: float = 60) -> None:
    """Create the topics and wait until the cluster's metadata shows all their partitions."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    for f in admin.create_topics([NewTopic(t, partitions, 1) for t in topics], operation_timeout=30).values():
        f.result()
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=10).topics
        if all(t in md and md[t].error is None and len(md[t].partitions) == partitions for t in topics):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"late topics {topics} did not appear on {bootstrap}")
        time.sleep(0.05)


def produce(bootstrap: str, topics: list[str], rate: float, warmup: float, seconds: float, cooldown: float,
            size: int, partitions: int, late: list[str] | None = None, late_at: float = 0.0,
            create_on: list[str] | None = None) -> dict:
    """Send at `rate` for warmup + seconds + cooldown, round robin over every partition of every topic; only the
    middle part is measured.

    The cool-down keeps records flowing behind the measured ones, so that a contender that
    holds a partial buffer until more data comes (a pipe) does not hold back the last of them.
    `late` topics are created `late_at` seconds after the start (on each of `create_on`, then on `bootstrap`)
    by a thread, and join the round robin once the source has them."""
    # librdkafka sends one partition's batch per produce request (confluentinc/librdkafka#1700, open): lingering 1 ms
    # over 12 partitions at 10,000 records/s asked the source broker up to 12,000 times a second, and with no mirror
    # running its JVM used a core and acknowledged in 0.08-1.4 s (p50) on the 2-core machine. librdkafka's default
    # of 5 ms, as the Java clients' since Kafka 4.0, asks a fifth as often; every contender's records linger alike.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": PRODUCE_LINGER_MS})
    targets = slots(topics, partitions)
    joined = threading.Event()  # set by the thread once the source has the late topics
    created: dict = {}
    late = late or []

    def create_late() -> None:
        try:
            time.sleep(max(0.0, t0 + late_at - time.monotonic()))
            for where in [*(create_on or []), bootstrap]:
                create_topics(where, late, partitions)
            created["ns"], created["at"] = time.time_ns(), time.monotonic() - t0
            joined.set()
        except Exception as e:  # noqa: BLE001 - reported by the main thread, which fails the run
            created["error"] = f"{type(e).__name__}: {e}"

    sent = measured = turn = 0
    late_measured = dict.fromkeys(late, 0)
    acked_ms: list[float] = []  # a measured record in ACK_SAMPLE: from its send to the source's acknowledgement

    def on_ack(sent_ns: int):
        return lambda err, _msg: err is None and acked_ms.append((time.time_ns() - sent_ns) / 1e6)
    t0 = time.monotonic()
    creator = threading.Thread(target=create_late, daemon=True)
    if late:
        creator.start()
    end = t0 + warmup + seconds + cooldown
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if joined.is_set() and len(targets) == len(topics) * partitions:
            targets = slots(topics + late, partitions)
        phase = WARMUP if now < t0 + warmup else MEASURED if now < t0 + warmup + seconds else COOLDOWN
        due = int((now - t0) * rate)
        while sent < due:
            topic, partition = targets[turn % len(targets)]
            now_ns = time.time_ns()
            value = encode(now_ns, phase, sent, size)
            timed = phase == MEASURED and sent % ACK_SAMPLE == 0
            try:
                if timed:
                    producer.produce(topic, value, partition=partition, on_delivery=on_ack(now_ns))
                else:
                    producer.produce(topic, value, partition=partition)
            except BufferError:
                producer.poll(0.01)
                continue
            if phase == MEASURED:
                measured += 1
                if topic in late_measured:
                    late_measured[topic] += 1
            sent += 1
            turn += 1
        producer.poll(0)
        time.sleep(0.0005)
    producer.flush(60)
    acked_ms.sort()
    out = {"sent": sent, "measured": measured, "seconds": time.monotonic() - t0,
           "source_ack": {"timed": len(acked_ms), "p50_ms": percentile(acked_ms, 0.5),
                          "p99_ms": percentile(acked_ms, 0.99)}}
    if late:
        creator.join(timeout=120)
        if "ns" not in created:
            raise RuntimeError(f"the late topics were not created: {created.get('error', 'still at it')}")
        out.update(late_measured=late_measured, late_created_ns=created["ns"],
                   late_created_s=created["at"] - warmup)  # into the measured window
    return out


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def parse_expected(line: str) -> dict:
    """What the bench tells the consumer once the producer is done: its JSON line, or (older callers) the
    number of measured records; {"measured": -1} when stdin closed with nothing."""
    line = line.strip()
    if not line:
        return {"measured": -1}
    value = json.loads(line)
    return {"measured": value} if isinstance(value, int) else value


def late_summary(expected: dict, late_latencies: dict[str, list[float]], first_ns: dict[str, int]) -> dict:
    """Delivery and latency of the measured records of the late topics, and how long after each was created
    on the source its first record (of any phase) arrived on the target."""
    want: dict[str, int] = expected.get("late_measured", {})
    got = {t: len(late_latencies.get(t, [])) for t in want}
    ordered = sorted(v for t in want for v in late_latencies.get(t, []))
    created = expected.get("late_created_ns")
    first = {t: (first_ns[t] - created) / 1e9 if created and t in first_ns else None for t in want}
    seen = [v for v in first.values() if v is not None]
    return {
        "topics": len(want), "expected": sum(want.values()), "received": sum(got.values()),
        "missing": sum(max(0, want[t] - got[t]) for t in want),
        "topics_complete": sum(got[t] >= want[t] for t in want),
        "p50_ms": percentile(ordered, 0.50), "p99_ms": percentile(ordered, 0.99),
        "max_ms": ordered[-1] if ordered else float("nan"),
        "first_record_s": first, "first_record_max_s": max(seen) if len(seen) == len(want) and seen else None,
        "created_s": expected.get("late_created_s"),
    }


def consume(bootstrap: str, topics: list[str], partitions: int, grace: float, late: list[str] | None = None) -> dict:
    """Time every measured record until the expected count (read from stdin) arrived or `grace` ran out."""
    # read_committed: a record counts when a consumer that skips aborted transactions could see it (the same as
    # read_uncommitted for a mirror that writes no transactions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "log_level": 4, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in range(partitions)])
    late = set(late or [])
    found: queue.SimpleQueue[list[TopicPartition]] = queue.SimpleQueue()
    stop = threading.Event()

    def look_for_late_topics() -> None:
        """Every LATE_LOOK seconds, in a thread of its own (a metadata request in the poll loop would hold up
        the timing of every record), the late topics' partitions that appeared on the target since."""
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
        waiting, assigned = set(late), set()
        while waiting and not stop.is_set():
            try:
                md = admin.list_topics(timeout=5).topics
            except KafkaException:
                md = {}
            new = [(t, p) for t in waiting if t in md and md[t].error is None for p in md[t].partitions
                   if (t, p) not in assigned]
            if new:
                found.put([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in new])
                assigned.update(new)
            waiting -= {t for t in waiting if t in md and md[t].error is None and len(md[t].partitions) >= partitions}
            stop.wait(LATE_LOOK)

    looker = threading.Thread(target=look_for_late_topics, daemon=True)
    if late:
        looker.start()
    expected: list[dict] = []

    def read_expected() -> None:
        expected.append(parse_expected(sys.stdin.readline()))

    threading.Thread(target=read_expected, daemon=True).start()
    print(json.dumps({"ready": True}), flush=True)
    latencies: dict[int, float] = {}
    late_latencies: dict[str, list[float]] = {}
    first_ns: dict[str, int] = {}
    duplicates = 0
    deadline = None
    while True:
        while not found.empty():
            consumer.incremental_assign(found.get_nowait())
        # the first record waited for, then what the fetches already brought, in one call: consume() with a timeout
        # would wait for a full batch, and a poll() a record cost the two cores the mirrors share a Python call each
        first = consumer.poll(0.1)
        batch = [first, *consumer.consume(CONSUME_BATCH, timeout=0)] if first is not None else []
        now = time.time_ns()
        for msg in batch:
            if msg.error():
                continue
            sent_ns, phase, seq = decode(msg.value())
            topic = msg.topic()
            if topic in late and topic not in first_ns:
                first_ns[topic] = now
            if phase == MEASURED:
                if seq in latencies:
                    duplicates += 1
                else:
                    latencies[seq] = (now - sent_ns) / 1e6
                    if topic in late:
                        late_latencies.setdefault(topic, []).append(latencies[seq])
        if expected:
            if deadline is None:
                deadline = time.monotonic() + grace
            if len(latencies) >= expected[0]["measured"] or time.monotonic() > deadline:
                break
    stop.set()
    consumer.close()
    ordered = sorted(latencies.values())
    want = expected[0]["measured"]
    out = {
        "expected": want, "received": len(ordered), "missing": max(0, want - len(ordered)),
        "duplicates": duplicates,
        "p50_ms": percentile(ordered, 0.50), "p99_ms": percentile(ordered, 0.99),
        "p999_ms": percentile(ordered, 0.999), "max_ms": ordered[-1] if ordered else float("nan"),
        "mean_ms": sum(ordered) / len(ordered) if ordered else float("nan"),
    }
    if late:
        out["late"] = late_summary(expected[0], late_latencies, first_ns)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.latency")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--warmup", type=float, default=5)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--cooldown", type=float, default=2)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--late-at", type=float, default=0.0, help="seconds after the start: create the late topics")
    p.add_argument("--create-on", default="", help="comma-separated bootstraps where the late topics are created "
                   "before the source (the target, for a contender that does not create topics)")
    c = sub.add_parser("consume")
    c.add_argument("--grace", type=float, default=60)
    for s in (p, c):
        s.add_argument("--bootstrap", required=True)
        s.add_argument("--topics", required=True, help="comma-separated: the topics there from the start")
        s.add_argument("--late-topics", default="", help="comma-separated: topics created while the stream runs")
        s.add_argument("--partitions", type=int, required=True, help="of each topic")
    a = ap.parse_args(argv)
    topics, late = a.topics.split(","), [t for t in a.late_topics.split(",") if t]
    if a.cmd == "produce":
        out = produce(a.bootstrap, topics, a.rate, a.warmup, a.seconds, a.cooldown, a.size, a.partitions, late,
                      a.late_at, [b for b in a.create_on.split(",") if b])
    else:
        out = consume(a.bootstrap, topics, a.partitions, a.grace, late)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
