"""Produce records to a source topic and wait until all of them are in the target cluster.

Runs on the molecule instance with the package's own interpreter (/opt/mirrord/bin/python), whose
confluent-kafka reaches the test brokers on the host's loopback. Exit 0 once every record arrived.
"""

import sys
import time
import uuid

from confluent_kafka import Consumer, Producer


def main(source: str, target: str, topic: str, count: int, timeout: float) -> int:
    run = uuid.uuid4().hex
    producer = Producer({"bootstrap.servers": source, "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, key=f"{run}-{i}".encode(), value=b"v")
    if producer.flush(30):
        print("records not delivered to the source", file=sys.stderr)
        return 1
    consumer = Consumer({"bootstrap.servers": target, "group.id": f"verify-{run}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < count and time.monotonic() < deadline:
            for msg in consumer.consume(100, timeout=1):
                if msg.error() is None and msg.key().startswith(run.encode()):
                    seen.add(msg.key())
    finally:
        consumer.close()
    print(f"{topic}: {len(seen)}/{count} records mirrored")
    return 0 if len(seen) == count else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])))
