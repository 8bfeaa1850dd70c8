"""The mirror end to end: real source and target brokers, mirrord as a subprocess."""

from __future__ import annotations

import random
import time

import pytest

from tests.harness.mirrord import Mirrord, write_flow
from tests.harness.records import (create_topic, end_offsets, produce, read_all, topic_partitions,
                                   wait_until)

DAY_MS = 86_400_000


def varied_records(n: int, partitions: int, seed: int) -> list[dict]:
    """Null keys and values, repeated and binary headers, old and odd timestamps: every edge a mirror can lose."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        headers = None
        if i % 3 == 0:
            headers = [("h", b"1"), ("bin", bytes([0, 255, i % 256])), ("h", b"2"), ("empty", b""), ("none", None)]
        out.append({
            "partition": i % partitions,
            "key": None if i % 7 == 0 else f"k{i}".encode(),
            "value": None if i % 11 == 0 else rnd.randbytes(rnd.randint(0, 300)),
            "headers": headers,
            # within retention (7 days), or the brokers would delete them; not in offset order
            "timestamp": int(time.time() * 1000) - rnd.randint(0, DAY_MS),
        })
    return out


def assert_same_records(source: str, target: str, topic: str, target_topic: str | None = None) -> None:
    src = read_all(source, topic)
    dst = read_all(target, target_topic or topic)
    assert topic_partitions(target, target_topic or topic) == len(src)
    for p in src:
        assert [r.fields() for r in dst[p]] == [r.fields() for r in src[p]], f"partition {p} differs"
        assert all(r.timestamp_type == 1 for r in dst[p])  # CreateTime


@pytest.fixture
def flow(kafka_pair, unique, tmp_path):
    source, target = kafka_pair
    group = unique("group")
    prefix = unique("fid")

    def make(whitelist: str, **kw) -> Mirrord:
        return Mirrord(write_flow(tmp_path / "flow", source.bootstrap, target.bootstrap, whitelist,
                                  group=group, **kw))
    make.group = group
    make.prefix = prefix
    return make


def test_every_field_of_every_record_arrives_in_order_and_only_whitelisted_topics_are_mirrored(kafka_pair, flow):
    source, target = kafka_pair
    p = flow.prefix
    topics = {f"{p}-orders": 3, f"{p}-payments": 2, f"{p}-single": 1}
    for t, n in topics.items():
        create_topic(source.bootstrap, t, n)
        produce(source.bootstrap, t, varied_records(400, n, seed=n))
    create_topic(source.bootstrap, f"{p}-private", 2)
    produce(source.bootstrap, f"{p}-private", varied_records(50, 2, seed=9))

    daemon = flow(f"{p}-(orders|payments|single)").start()
    try:
        daemon.wait_ready()
        for t in topics:
            wait_until(lambda t=t: sum(end_offsets(target.bootstrap, t).values()) >= 400, 120, f"{t} mirrored")
        # more records while it runs: the stream, not only the backlog
        for t, n in topics.items():
            produce(source.bootstrap, t, varied_records(100, n, seed=n + 100))
        for t in topics:
            wait_until(lambda t=t: sum(end_offsets(target.bootstrap, t).values()) >= 500, 120, f"{t} streamed")
        for t in topics:
            assert_same_records(source.bootstrap, target.bootstrap, t)
        assert topic_partitions(target.bootstrap, f"{p}-private") == 0
        assert daemon.stop() == 0
    finally:
        daemon.stop()
