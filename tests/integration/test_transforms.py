"""Transforms end to end (prod → dev copies): real brokers, one mirrord subprocess for the module.

One flow carries several [transform:NAME] sections over distinct topics (filter, sample, mask, key
rewrite, header drop, and two sections chained on one topic) plus topics.exclude, so that one daemon
start covers them all. Everything a transform does not touch must arrive byte for byte.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict

import pytest

from tests.harness.mirrord import Mirrord, metric_value, write_flow
from tests.harness.records import (
    commit_offsets,
    committed_offsets,
    create_topic,
    end_offsets,
    produce,
    read_all,
    topic_partitions,
    wait_until,
)

SAMPLE = 0.3


def json_records(n: int, partitions: int, keys: int | None = None) -> list[dict]:
    """JSON values with an email and a kind (every third an audit record), headers with an authorization,
    keys from a pool of `keys` (every 13th record keyless), timestamps in the past and out of order."""
    now = int(time.time() * 1000)
    out = []
    for i in range(n):
        key = None if i % 13 == 0 else f"user-{i % keys if keys else i}".encode()
        value = {"n": i, "kind": "audit" if i % 3 == 0 else "order", "email": f"person{i}@example.com",
                 "note": "caf\u00e9 \"quoted\""}
        out.append({
            "partition": i % partitions,
            "key": key,
            "value": json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(),
            "headers": [("trace", str(i).encode()), ("Authorization", b"Bearer secret"), ("bin", bytes([0, 255]))],
            "timestamp": now - 3_600_000 + (i * 7919) % 3_000_000,
        })
    return out


def conf_sections(p: str) -> str:
    return f"""
[transform:no-audit]
topics = {p}-filtered
filter = get_json_object(CAST(value AS STRING), '$.kind') <> 'audit'

[transform:sample]
topics = {p}-sampled
sample = {SAMPLE}

[transform:mask]
topics = {p}-masked
value = regexp_replace(CAST(value AS STRING), '"email":"[^"]*"', '"email":"***"')

[transform:rekey]
topics = {p}-rekeyed
key = concat('dev-', CAST(key AS STRING))

[transform:no-auth]
topics = {p}-(masked|rekeyed)
drop.headers = (?i)authorization
"""


@pytest.fixture(scope="module")
def flow(kafka_pair, tmp_path_factory):
    source, target = kafka_pair
    p = f"tf-{time.monotonic_ns()}"
    config = write_flow(tmp_path_factory.mktemp("flow"), source.bootstrap, target.bootstrap, f"{p}-.*",
                        group=f"{p}-mirror",
                        conf={"topics.exclude": f"{p}-internal-.*", "sync.group.offsets.enabled": "true",
                              "sync.group.offsets.interval.seconds": "1", "groups": f"{p}-app.*",
                              "offset.lag.max": "10"})
    with open(config, "a") as f:
        f.write(conf_sections(p))
    topics = {"filtered": 2, "sampled": 3, "masked": 2, "rekeyed": 2, "internal-secrets": 1}
    for name, partitions in topics.items():
        create_topic(source.bootstrap, f"{p}-{name}", partitions)
    produced = {
        "filtered": json_records(300, 2),
        "sampled": json_records(2000, 3, keys=200),
        "masked": json_records(150, 2),
        "rekeyed": json_records(150, 2),
        "internal-secrets": json_records(20, 1),
    }
    for name, records in produced.items():
        produce(source.bootstrap, f"{p}-{name}", records)
    daemon = Mirrord(config).start()
    daemon.prefix, daemon.group = p, f"{p}-mirror"
    try:
        daemon.wait_ready()
        for name in ("filtered", "sampled", "masked", "rekeyed"):
            topic = f"{p}-{name}"
            ends = end_offsets(source.bootstrap, topic)
            wait_until(lambda t=topic, e=ends: committed_offsets(source.bootstrap, daemon.group, t) == e, 180,
                       f"{topic} mirrored to its end")
        yield daemon
        assert daemon.stop() == 0, daemon.output()[-2000:]
    finally:
        daemon.stop()


def test_a_filter_drops_what_it_rejects_and_keeps_the_rest_byte_for_byte_in_order(kafka_pair, flow):
    source, target = kafka_pair
    topic = f"{flow.prefix}-filtered"
    src, dst = read_all(source.bootstrap, topic), read_all(target.bootstrap, topic)
    assert topic_partitions(target.bootstrap, topic) == 2
    dropped = 0
    for p, records in src.items():
        kept = [r for r in records if json.loads(r.value)["kind"] != "audit"]
        dropped += len(records) - len(kept)
        assert [r.fields() for r in dst[p]] == [r.fields() for r in kept], f"partition {p} differs"
        assert all(r.timestamp_type == 1 for r in dst[p])
    assert dropped == 100
    wait_until(lambda: metric_value(flow.metrics(), "mirrord_records_filtered_total", topic=topic,
                                    transform="no-audit") == dropped, 30,
               f"mirrord_records_filtered_total{{transform=no-audit}} to read {dropped}")
    assert metric_value(flow.metrics(), "mirrord_records_total", topic=topic) == 200


def test_a_sample_keeps_about_its_fraction_and_every_record_of_a_kept_key(kafka_pair, flow):
    source, target = kafka_pair
    topic = f"{flow.prefix}-sampled"
    src, dst = read_all(source.bootstrap, topic), read_all(target.bootstrap, topic)
    kept_keys, seen_keys = set(), set()
    copied = 0
    for p, records in src.items():
        copies = {r.fields() for r in dst[p]}
        kept = [r for r in records if r.fields() in copies]
        assert [r.fields() for r in dst[p]] == [r.fields() for r in kept], f"partition {p}: order or bytes differ"
        copied += len(kept)
        seen_keys |= {r.key for r in records if r.key is not None}
        kept_keys |= {r.key for r in kept if r.key is not None}
    by_key = defaultdict(set)
    for p, records in src.items():
        copies = {r.fields() for r in dst[p]}
        for r in records:
            if r.key is not None:
                by_key[r.key].add(r.fields() in copies)
    assert all(len(fates) == 1 for fates in by_key.values()), "a key's records were split between kept and dropped"
    assert abs(len(kept_keys) / len(seen_keys) - SAMPLE) < 0.1, f"{len(kept_keys)} of {len(seen_keys)} keys kept"
    total = sum(len(r) for r in src.values())
    assert abs(copied / total - SAMPLE) < 0.1, f"{copied} of {total} records kept"
    keyless = [r for records in src.values() for r in records if r.key is None]
    assert 0 < sum(r.fields() in {c.fields() for c in dst[r.partition]} for r in keyless) < len(keyless)
    wait_until(lambda: metric_value(flow.metrics(), "mirrord_records_filtered_total", topic=topic,
                                    transform="sample") == total - copied, 30, "the sample's drops counted")


def test_a_masked_field_is_replaced_and_every_other_byte_is_kept(kafka_pair, flow):
    source, target = kafka_pair
    topic = f"{flow.prefix}-masked"
    src, dst = read_all(source.bootstrap, topic), read_all(target.bootstrap, topic)
    for p, records in src.items():
        assert len(dst[p]) == len(records)
        for s, d in zip(records, dst[p], strict=True):
            assert json.loads(d.value) == {**json.loads(s.value), "email": "***"}
            assert d.value == s.value.replace(f'"{json.loads(s.value)["email"]}"'.encode(), b'"***"')
            assert (d.partition, d.key, d.timestamp) == (s.partition, s.key, s.timestamp)
            assert d.headers == tuple(h for h in s.headers if h[0].lower() != "authorization")
    assert metric_value(flow.metrics(), "mirrord_records_filtered_total", topic=topic, transform="mask") is None


def test_a_rewritten_key_and_dropped_headers_leave_timestamps_partitions_and_values_alone(kafka_pair, flow):
    source, target = kafka_pair
    topic = f"{flow.prefix}-rekeyed"
    src, dst = read_all(source.bootstrap, topic), read_all(target.bootstrap, topic)
    for p, records in src.items():
        assert [(d.partition, d.key, d.value, d.headers, d.timestamp) for d in dst[p]] == [
            (s.partition, None if s.key is None else b"dev-" + s.key, s.value,
             tuple(h for h in s.headers if h[0] != "Authorization"), s.timestamp) for s in records]


def test_topics_exclude_keeps_matching_topics_out_of_the_target(kafka_pair, flow):
    source, target = kafka_pair
    assert topic_partitions(target.bootstrap, f"{flow.prefix}-internal-secrets") == 0
    assert "but not" in flow.output()


def test_groups_on_a_filtered_topic_fail_over_never_ahead_and_a_caught_up_group_exactly(kafka_pair, flow):
    """The target holds fewer records than the source: a group's position translates at most to the target
    offset of the first kept record at or after it (a consumer may re-read, never skip), and a group at the
    source's end to the target's end (a sync at each gap the filter leaves, and at a run's end)."""
    source, target = kafka_pair
    topic = f"{flow.prefix}-filtered"
    src, dst = read_all(source.bootstrap, topic), read_all(target.bootstrap, topic)
    behind, caught_up = f"{flow.prefix}-app-behind", f"{flow.prefix}-app-caught-up"
    positions = {0: 60, 1: 91}  # both on dropped (audit) records: 60 is record 120, 91 is record 183
    commit_offsets(source.bootstrap, behind, topic, positions)
    commit_offsets(source.bootstrap, caught_up, topic, end_offsets(source.bootstrap, topic))
    first_kept = {}
    for p, position in positions.items():
        first_kept[p] = sum(1 for r in src[p][:position] if json.loads(r.value)["kind"] != "audit")
        after = [r.fields() for r in src[p][position:] if json.loads(r.value)["kind"] != "audit"]
        assert [r.fields() for r in dst[p][first_kept[p]:]] == after

    def translated():
        now = committed_offsets(target.bootstrap, behind, topic)
        assert all(now[p] <= first_kept[p] for p in now), f"translated ahead of the group: {now} > {first_kept}"
        return len(now) == len(positions) and now

    wait_until(translated, 60, f"{behind} translated")
    ends = end_offsets(target.bootstrap, topic)
    wait_until(lambda: committed_offsets(target.bootstrap, caught_up, topic) == ends, 60,
               f"{caught_up} translated to the target's end offsets {ends}")
