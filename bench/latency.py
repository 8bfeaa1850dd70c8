"""The steady-stream workload: a paced producer into the source and a timing consumer on the target.

Each value starts with the send time (ns since the epoch, 20 ASCII digits), a phase letter and a
sequence number, then padding: ASCII only and newline-free, so even a line-based pipe (kcat)
carries it intact, and the latency does not depend on a contender keeping record timestamps.
Run as `python -m bench.latency produce|consume ...`; each prints one JSON line at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

HEAD = 33  # 20 digits of send time, 1 phase letter, 12 digits of sequence number
PROBE, WARMUP, MEASURED, COOLDOWN = "P", "W", "M", "C"


def encode(send_ns: int, phase: str, seq: int, size: int) -> bytes:
    head = b"%020d%s%012d" % (send_ns, phase.encode(), seq)
    return head + b"x" * max(0, size - HEAD)


def decode(value: bytes) -> tuple[int, str, int]:
    return int(value[:20]), chr(value[20]), int(value[21:33])


def produce(bootstrap: str, topic: str, rate: float, warmup: float, seconds: float, cooldown: float,
            size: int, partitions: int) -> dict:
    """Send at `rate` for warmup + seconds + cooldown; only the middle part is measured.

    The cool-down keeps records flowing behind the measured ones, so that a contender that
    holds a partial buffer until more data comes (a pipe) does not hold back the last of them."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    sent = measured = 0
    t0 = time.monotonic()
    end = t0 + warmup + seconds + cooldown
    while True:
        now = time.monotonic()
        if now >= end:
            break
        phase = WARMUP if now < t0 + warmup else MEASURED if now < t0 + warmup + seconds else COOLDOWN
        due = int((now - t0) * rate)
        while sent < due:
            value = encode(time.time_ns(), phase, sent, size)
            try:
                producer.produce(topic, value, partition=sent % partitions)
            except BufferError:
                producer.poll(0.01)
                continue
            measured += phase == MEASURED
            sent += 1
        producer.poll(0)
        time.sleep(0.0005)
    producer.flush(60)
    return {"sent": sent, "measured": measured, "seconds": time.monotonic() - t0}


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def consume(bootstrap: str, topic: str, partitions: int, grace: float) -> dict:
    """Time every measured record until the expected count (read from stdin) arrived or `grace` ran out."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    expected: list[int] = []

    def read_expected() -> None:
        line = sys.stdin.readline()
        expected.append(int(line) if line.strip() else -1)

    threading.Thread(target=read_expected, daemon=True).start()
    print(json.dumps({"ready": True}), flush=True)
    latencies: dict[int, float] = {}
    duplicates = 0
    deadline = None
    while True:
        msg = consumer.poll(0.1)
        now = time.time_ns()
        if msg is not None and not msg.error():
            sent_ns, phase, seq = decode(msg.value())
            if phase == MEASURED:
                if seq in latencies:
                    duplicates += 1
                else:
                    latencies[seq] = (now - sent_ns) / 1e6
        if expected:
            if deadline is None:
                deadline = time.monotonic() + grace
            if len(latencies) >= expected[0] or time.monotonic() > deadline:
                break
    consumer.close()
    ordered = sorted(latencies.values())
    return {
        "expected": expected[0], "received": len(ordered), "missing": max(0, expected[0] - len(ordered)),
        "duplicates": duplicates,
        "p50_ms": percentile(ordered, 0.50), "p99_ms": percentile(ordered, 0.99),
        "p999_ms": percentile(ordered, 0.999), "max_ms": ordered[-1] if ordered else float("nan"),
        "mean_ms": sum(ordered) / len(ordered) if ordered else float("nan"),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.latency")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--warmup", type=float, default=5)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--cooldown", type=float, default=2)
    p.add_argument("--size", type=int, default=100)
    c = sub.add_parser("consume")
    c.add_argument("--grace", type=float, default=60)
    for s in (p, c):
        s.add_argument("--bootstrap", required=True)
        s.add_argument("--topic", required=True)
        s.add_argument("--partitions", type=int, required=True)
    a = ap.parse_args(argv)
    if a.cmd == "produce":
        out = produce(a.bootstrap, a.topic, a.rate, a.warmup, a.seconds, a.cooldown, a.size, a.partitions)
    else:
        out = consume(a.bootstrap, a.topic, a.partitions, a.grace)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
