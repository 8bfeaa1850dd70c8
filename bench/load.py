"""The backfill's preload over many topics: ProducerPerformance writes one topic, so with `--topics` > 1 this
spreads the records round robin over every (topic, partition) instead (bench.shape.slots). Values are random
capital letters, as ProducerPerformance's are (from a pool of 1,024, drawn once), no keys.

Run as `python -m bench.load --bootstrap B --topics a,b --partitions N --records R --size S [--prop k=v ...]`;
prints one JSON line at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from confluent_kafka import Producer

from bench.shape import slots

POOL = 1024


def values(size: int, seed: int = 0) -> list[bytes]:
    rnd = random.Random(seed)
    return [bytes(rnd.choices(range(ord("A"), ord("Z") + 1), k=size)) for _ in range(POOL)]


def load(bootstrap: str, topics: list[str], partitions: int, records: int, size: int, props: dict[str, str]) -> dict:
    """No delivery callback (a Python call per record would cost more than the produce): the bench checks the
    source's end offsets against the count afterwards, as it does after ProducerPerformance."""
    producer = Producer({"bootstrap.servers": bootstrap, **props, "queue.buffering.max.kbytes": 1048576,
                         "log_level": 4})
    pool, targets = values(size), slots(topics, partitions)
    n = len(targets)
    t0 = time.monotonic()
    for i in range(records):
        topic, partition = targets[i % n]
        while True:
            try:
                producer.produce(topic, pool[i % POOL], partition=partition)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 4096 == 0:
            producer.poll(0)
    left = producer.flush(300)
    seconds = time.monotonic() - t0
    if left:
        raise RuntimeError(f"{left} records still queued after 300 s")
    return {"records": records, "records_per_s": records / seconds, "seconds": seconds}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topics", required=True, help="comma-separated")
    ap.add_argument("--partitions", type=int, required=True, help="of each topic")
    ap.add_argument("--records", type=int, required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--prop", action="append", default=[], help="key=value, a librdkafka producer setting")
    a = ap.parse_args(argv)
    props = dict(kv.split("=", 1) for kv in a.prop)
    print(json.dumps(load(a.bootstrap, a.topics.split(","), a.partitions, a.records, a.size, props)), flush=True)


if __name__ == "__main__":
    main()
