"""The mirror end to end: real source and target brokers, one mirrord subprocess for this module.

The tests share the daemon (its whitelist is this module's topic prefix) and use distinct topics.
"""

from __future__ import annotations

import random
import re
import shutil
import time

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from mirrord.mm2.offsets import OffsetSync, OffsetSyncStore, encode
from mirrord.mm2.offsets import decode as decode_sync
from mirrord.settings.policy import offset_syncs_topic
from tests.harness.kafka import run_class
from tests.harness.mirrord import EVERY_CASE, Mirrord, metric_value, write_flow
from tests.harness.notify import NotifySocket
from tests.harness.records import (
    commit_offsets,
    committed_offsets,
    count,
    create_topic,
    end_offsets,
    produce,
    read_all,
    read_committed,
    topic_partitions,
    wait_until,
)

DAY_MS = 86_400_000


def varied_records(n: int, partitions: int, seed: int) -> list[dict]:
    """Null keys and values, repeated and binary headers, timestamps out of order: every edge a mirror can lose."""
    rnd = random.Random(seed)
    now = int(time.time() * 1000)
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
            "timestamp": now - rnd.randint(0, DAY_MS),  # within the brokers' 7-day retention
        })
    return out


def assert_same_records(source: str, target: str, topic: str) -> None:
    src = read_all(source, topic)
    dst = read_all(target, topic)
    assert topic_partitions(target, topic) == len(src)
    for p in src:
        assert [r.fields() for r in dst[p]] == [r.fields() for r in src[p]], f"{topic} partition {p} differs"
        assert all(r.timestamp_type == 1 for r in dst[p]), "target timestamps must be CreateTime"


@pytest.fixture(scope="module")
def mirror(kafka_pair, tmp_path_factory):
    """One daemon mirroring `mod-<pid>-.*` for the module; it must stop cleanly at the end."""
    source, target = kafka_pair
    prefix = f"mod-{time.monotonic_ns()}"
    config = write_flow(tmp_path_factory.mktemp("flow"), source.bootstrap, target.bootstrap,
                        f"{prefix}-(?!private).*", group=f"{prefix}-mirror",
                        conf={"sync.topic.configs.interval.seconds": "2", "sync.group.offsets.enabled": "true",
                              "sync.group.offsets.interval.seconds": "2", "groups": f"{prefix}-.*"})
    daemon = Mirrord(config).start()
    daemon.prefix = prefix
    daemon.group = f"{prefix}-mirror"
    try:
        daemon.wait_ready()
        yield daemon
        assert daemon.stop() == 0, daemon.output()[-2000:]
    finally:
        daemon.stop()


def test_every_field_of_every_record_arrives_in_order_and_only_whitelisted_topics_are_mirrored(kafka_pair, mirror):
    source, target = kafka_pair
    p = mirror.prefix
    topics = {f"{p}-orders": 3, f"{p}-payments": 2, f"{p}-single": 1}
    # matched by the whitelist, yet internal (MirrorMaker 2's naming): mirrord must leave it out
    internal = f"{p}-mm2-offset-syncs.elsewhere.internal"
    for t in (f"{p}-private", internal):
        create_topic(source.bootstrap, t, 2)
        produce(source.bootstrap, t, varied_records(50, 2, seed=9))
    for t, n in topics.items():
        create_topic(source.bootstrap, t, n)
        produce(source.bootstrap, t, varied_records(400, n, seed=n))
    for t in topics:
        wait_until(lambda t=t: count(target.bootstrap, t) >= 400, 120, f"{t} mirrored")
    for t, n in topics.items():  # and records produced while it runs
        produce(source.bootstrap, t, varied_records(100, n, seed=n + 100))
    for t in topics:
        wait_until(lambda t=t: count(target.bootstrap, t) >= 500, 120, f"{t} streamed")
    for t in topics:
        assert_same_records(source.bootstrap, target.bootstrap, t)
    assert topic_partitions(target.bootstrap, f"{p}-private") == 0
    assert topic_partitions(target.bootstrap, internal) == 0, "an internal topic was mirrored"


def test_a_topic_created_while_running_is_mirrored_without_restart(kafka_pair, mirror):
    source, target = kafka_pair
    topic = f"{mirror.prefix}-late"
    wait_until(lambda: "records mirrored" in mirror.output(), 60, "the daemon's first status line")
    create_topic(source.bootstrap, topic, 4)
    produce(source.bootstrap, topic, varied_records(200, 4, seed=4))
    wait_until(lambda: count(target.bootstrap, topic) >= 200, 120, "the new topic mirrored")
    assert_same_records(source.bootstrap, target.bootstrap, topic)
    assert mirror.alive()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_records_compressed_with_any_codec_of_kafka_arrive_byte_for_byte(kafka_pair, mirror, codec):
    source, target = kafka_pair
    topic = f"{mirror.prefix}-{codec}"
    create_topic(source.bootstrap, topic, 2)
    produce(source.bootstrap, topic, varied_records(300, 2, seed=len(codec)), {"compression.type": codec})
    wait_until(lambda: count(target.bootstrap, topic) >= 300, 120, f"{topic} mirrored")
    assert_same_records(source.bootstrap, target.bootstrap, topic)


def test_partitions_added_on_the_source_are_added_on_the_target_and_mirrored_to_the_same_numbers(
        kafka_pair, mirror):
    from confluent_kafka.admin import NewPartitions

    source, target = kafka_pair
    topic = f"{mirror.prefix}-grown"
    create_topic(source.bootstrap, topic, 2)
    produce(source.bootstrap, topic, varied_records(100, 2, seed=5))
    wait_until(lambda: count(target.bootstrap, topic) >= 100, 120, "the topic mirrored")
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result()
    wait_until(lambda: topic_partitions(source.bootstrap, topic) == 4, 30, "4 partitions on the source")
    produce(source.bootstrap, topic, varied_records(200, 4, seed=6))
    wait_until(lambda: topic_partitions(target.bootstrap, topic) == 4, 60, "4 partitions on the target")
    wait_until(lambda: count(target.bootstrap, topic) >= 300, 120, "the new partitions' records mirrored")
    assert_same_records(source.bootstrap, target.bootstrap, topic)


def topic_own_configs(bootstrap: str, topic: str) -> dict[str, str]:
    """The configs set on the topic itself, as `kafka-configs --describe --entity-type topics` lists them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result()
    return {k: e.value for k, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def test_a_target_topic_gets_its_source_topics_own_configs_and_their_changes(kafka_pair, mirror):
    source, target = kafka_pair
    topic = f"{mirror.prefix}-kept-forever"
    # kept forever and compacted in the source: the target's 7-day default would delete these old records
    create_topic(source.bootstrap, topic, 2, config={
        "retention.ms": "-1", "cleanup.policy": "compact,delete", "max.message.bytes": "2097152",
        "min.insync.replicas": "1", "message.timestamp.type": "CreateTime"})
    old = [{"partition": i % 2, "key": f"k{i}".encode(), "value": bytes([i]) * 10, "headers": [("i", bytes([i]))],
            "timestamp": 1_546_300_800_000 + i} for i in range(100)]  # January 2019
    produce(source.bootstrap, topic, old)
    wait_until(lambda: count(target.bootstrap, topic) >= 100, 120, "the topic mirrored")
    assert topic_own_configs(target.bootstrap, topic) == {
        "retention.ms": "-1", "cleanup.policy": "compact,delete", "max.message.bytes": "2097152"}
    assert_same_records(source.bootstrap, target.bootstrap, topic)
    assert f"target topic {topic}: created (cleanup.policy=compact,delete, max.message.bytes=2097152, " \
           "retention.ms=-1)" in mirror.output()

    # later: the source topic gets 30 days of retention and a new config; an operator's setting on the target stays
    set_topic_configs(target.bootstrap, topic, {"segment.bytes": "1048576"})
    set_topic_configs(source.bootstrap, topic, {"retention.ms": "2592000000", "segment.ms": "3600000"})
    wanted = {"retention.ms": "2592000000", "cleanup.policy": "compact,delete", "max.message.bytes": "2097152",
              "segment.ms": "3600000", "segment.bytes": "1048576"}
    wait_until(lambda: topic_own_configs(target.bootstrap, topic) == wanted, 60, f"the target topic's configs {wanted}")

    # a config deleted on the source goes from the target too; the operator's own setting still stays
    set_topic_configs(source.bootstrap, topic, {"segment.ms": None, "max.message.bytes": None})
    wanted = {"retention.ms": "2592000000", "cleanup.policy": "compact,delete", "segment.bytes": "1048576"}
    wait_until(lambda: topic_own_configs(target.bootstrap, topic) == wanted, 60, f"the target topic's configs {wanted}")


def set_topic_configs(bootstrap: str, topic: str, configs: dict[str, str | None]) -> None:
    """As `kafka-configs --alter --add-config` (or `--delete-config`, for None) would."""
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None else
                           AlterConfigOpType.DELETE) for k, v in configs.items()]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected client cancels its requests
    admin.incremental_alter_configs([resource])[resource].result()


def test_mirrored_offsets_are_committed_under_the_consumer_group(kafka_pair, mirror):
    source, target = kafka_pair
    topic = f"{mirror.prefix}-committed"
    create_topic(source.bootstrap, topic, 2)
    produce(source.bootstrap, topic, varied_records(300, 2, seed=5))
    ends = end_offsets(source.bootstrap, topic)
    wait_until(lambda: committed_offsets(source.bootstrap, mirror.group, topic) == ends, 120,
               f"group {mirror.group} at the end offsets {ends}")
    # what an operator sees with Kafka's own tool
    described = run_class("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                          "--bootstrap-server", source.bootstrap, "--describe", "--group", mirror.group)
    rows = [line.split() for line in described.stdout.splitlines() if f" {topic} " in f" {line} "]
    assert {(int(r[2]), int(r[3]), int(r[5])) for r in rows} == {(p, e, 0) for p, e in ends.items()}, described


def test_consumer_groups_fail_over_to_translated_offsets_on_the_target(kafka_pair, mirror):
    source, target = kafka_pair
    topic = f"{mirror.prefix}-failover"
    # the target topic first, holding records already (target offsets are not the source's): once the
    # source topic exists, mirrord creates its copy within a second
    create_topic(target.bootstrap, topic, 2)
    prefill = {0: 17, 1: 5}
    produce(target.bootstrap, topic, [{"partition": p, "key": b"old", "value": b"already here"}
                                      for p, n in prefill.items() for _ in range(n)])
    create_topic(source.bootstrap, topic, 2)
    produce(source.bootstrap, topic, varied_records(300, 2, seed=8))
    ends = end_offsets(source.bootstrap, topic)
    wait_until(lambda: committed_offsets(source.bootstrap, mirror.group, topic) == ends, 120, "the topic mirrored")
    caught_up, behind = f"{mirror.prefix}-billing", f"{mirror.prefix}-audit"
    commit_offsets(source.bootstrap, caught_up, topic, ends)
    commit_offsets(source.bootstrap, behind, topic, {0: 40, 1: 25})

    # the consumers fail over: on the target, their groups resume where they were, or a little before
    target_ends = {p: prefill[p] + ends[p] for p in ends}
    wait_until(lambda: committed_offsets(target.bootstrap, caught_up, topic) == target_ends, 60,
               f"{caught_up} translated to the target's end offsets {target_ends}")
    resumed = wait_until(lambda: committed_offsets(target.bootstrap, behind, topic), 60, f"{behind} translated")
    src, dst = read_all(source.bootstrap, topic), read_all(target.bootstrap, topic)
    for p, position in {0: 40, 1: 25}.items():
        assert prefill[p] <= resumed[p] <= prefill[p] + position, \
            f"partition {p}: translated outside the mirrored copy or past the group's position: {resumed}"
        assert [r.fields() for r in dst[p][resumed[p]:]][-(len(src[p]) - position):] == \
            [r.fields() for r in src[p][position:]], f"partition {p}: records skipped after failover"
    assert committed_offsets(target.bootstrap, mirror.group, topic) == {}, "mirrord's own group was translated"


def test_first_start_resumes_from_the_groups_committed_offsets(kafka_pair, unique, tmp_path):
    """A MirrorMaker 1 deployment with the same group.id switches over without re-copying."""
    source, target = kafka_pair
    topic, group = unique("switch"), unique("mm1-group")
    create_topic(source.bootstrap, topic, 2)
    records = varied_records(200, 2, seed=6)
    produce(source.bootstrap, topic, records)
    commit_offsets(source.bootstrap, group, topic, {0: 60, 1: 30})  # where MirrorMaker 1 stopped

    daemon = Mirrord(write_flow(tmp_path, source.bootstrap, target.bootstrap, topic, group=group)).start()
    try:
        daemon.wait_ready()
        wait_until(lambda: count(target.bootstrap, topic) >= 110, 120, "the rest of the topic mirrored")
        src, dst = read_all(source.bootstrap, topic), read_all(target.bootstrap, topic)
        assert [r.fields() for r in dst[0]] == [r.fields() for r in src[0][60:]]
        assert [r.fields() for r in dst[1]] == [r.fields() for r in src[1][30:]]
        assert daemon.stop() == 0
    finally:
        daemon.stop()


def test_metrics_count_every_mirrored_record_and_lag_returns_to_zero(kafka_pair, mirror):
    source, target = kafka_pair
    topic = f"{mirror.prefix}-metered"
    create_topic(source.bootstrap, topic, 3)
    latencies_before = metric_value(mirror.metrics(), "mirrord_replication_latency_seconds_count") or 0
    records = varied_records(900, 3, seed=7)
    produce(source.bootstrap, topic, records)
    wait_until(lambda: count(target.bootstrap, topic) >= 900, 120, "records mirrored")
    wait_until(lambda: metric_value(mirror.metrics(), "mirrord_records_total", topic=topic) == 900, 30,
               "mirrord_records_total to read 900")
    key_value_bytes = sum(len(r["key"] or b"") + len(r["value"] or b"") for r in records)
    assert metric_value(mirror.metrics(), "mirrord_bytes_total", topic=topic) == key_value_bytes
    for p in range(3):
        wait_until(lambda p=p: metric_value(mirror.metrics(), "mirrord_partition_lag", topic=topic,
                                            partition=str(p)) == 0, 30, f"lag of partition {p} at 0")
    text = mirror.metrics()
    assert metric_value(text, "mirrord_up", flow="test") == 1
    assert metric_value(text, "mirrord_last_commit_timestamp_seconds") > time.time() - 60
    wait_until(lambda: metric_value(mirror.metrics(), "mirrord_replication_latency_seconds_count")
               >= latencies_before + 900, 30, "a latency observed for each of this test's 900 records")
    assert metric_value(text, "mirrord_build_info") == 1


def test_keys_and_headers_that_look_like_mirrords_own_are_mirrored_unchanged(kafka_pair, mirror):
    """A source record whose key looks like the envelope earlier releases wrapped keys in (source timestamp and
    offset, for their producer interceptor), or whose headers carry mirrord's names, arrives exactly as it was:
    the writer takes plain columns and reads nothing into keys or headers."""
    source, target = kafka_pair
    topic = f"{mirror.prefix}-lookalike"
    create_topic(source.bootstrap, topic, 2)
    now = int(time.time() * 1000)
    envelope_like = bytes([1, 0]) + now.to_bytes(8, "big") + (7).to_bytes(8, "big") + b"inner-key"
    records = [
        {"partition": 0, "key": envelope_like, "value": b"v0", "timestamp": now - 5000,
         "headers": [("mirrord.run.start", (5).to_bytes(8, "big")), ("mirrord", b"x"), ("mirrord", None)]},
        {"partition": 1, "key": bytes([1, 1]), "value": None, "timestamp": now - 4000,
         "headers": [("mirrord_envelope", envelope_like)]},
        {"partition": 0, "key": b"", "value": b"", "timestamp": now - 3000, "headers": [("", b"")]},
        {"partition": 1, "key": None, "value": envelope_like, "timestamp": now - 2000, "headers": None},
    ]
    produce(source.bootstrap, topic, records)
    wait_until(lambda: count(target.bootstrap, topic) >= len(records), 120, "the records mirrored")
    assert_same_records(source.bootstrap, target.bootstrap, topic)


def test_a_group_a_few_records_behind_resumes_exactly_after_its_last_record_on_a_prefilled_target(
        kafka_pair, mirror):
    """The failover walkthrough: a group that consumed 5 of 10 records on the source resumes on the target at
    the 6th, although the target topic already held other records, so target offsets differ from the source's."""
    source, target = kafka_pair
    topic = f"{mirror.prefix}-prefilled"
    create_topic(target.bootstrap, topic, 2)  # first: mirrord creates the copy as soon as the source topic exists
    produce(target.bootstrap, topic, [{"partition": i % 2, "key": b"old", "value": b"already here"} for i in range(61)])
    create_topic(source.bootstrap, topic, 2)
    before = end_offsets(target.bootstrap, topic)
    assert before == {0: 31, 1: 30}
    produce(source.bootstrap, topic, varied_records(20, 2, seed=11))  # 10 per partition
    ends = end_offsets(source.bootstrap, topic)
    wait_until(lambda: committed_offsets(source.bootstrap, mirror.group, topic) == ends, 120, "the topic mirrored")

    group = f"{mirror.prefix}-walkthrough"
    consumed = {0: 5, 1: 7}
    commit_offsets(source.bootstrap, group, topic, consumed)
    expected = {p: before[p] + n for p, n in consumed.items()}
    wait_until(lambda: committed_offsets(target.bootstrap, group, topic) == expected, 60,
               f"{group} translated exactly to {expected}")
    src, dst = read_all(source.bootstrap, topic), read_all(target.bootstrap, topic)
    for p, n in consumed.items():
        assert dst[p][expected[p]].fields() == src[p][n].fields(), f"partition {p}: not the next record"


# exactly once by default (syncs inside transactions, the target's offsets with gaps); MIRRORD_EVERY_CASE both
@pytest.mark.parametrize("delivery", [pytest.param("at-least-once", marks=EVERY_CASE), "exactly-once"])
def test_translation_reads_the_offset_syncs_back_from_the_target_after_the_state_dir_is_lost(
        kafka_pair, unique, tmp_path, delivery):
    """Exactly once, the syncs are written in the records' transactions and the target's offsets have gaps (the
    transaction markers): the group lands on the copy of its next record all the same, also inside the last
    burst a partition copied before it went quiet (that run's last sync is in its own transaction)."""
    source, target = kafka_pair
    topic, group = unique("syncs-kept"), unique("syncs-kept-mirror")
    create_topic(source.bootstrap, topic, 2)
    create_topic(target.bootstrap, topic, 2)
    produce(target.bootstrap, topic, [{"partition": 0, "key": b"old", "value": b"x"}] * 13)
    produce(source.bootstrap, topic, varied_records(300, 2, seed=12))
    ends = end_offsets(source.bootstrap, topic)
    consumer_group = unique("syncs-kept-app")
    config = write_flow(tmp_path / "flow", source.bootstrap, target.bootstrap, topic, group=group,
                        conf={"sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
                              "groups": consumer_group, "source.alias": (alias := unique("alias")),
                              "delivery": delivery})
    daemon = Mirrord(config).start()
    try:
        daemon.wait_ready()
        wait_until(lambda: committed_offsets(source.bootstrap, group, topic) == ends, 120, "the topic mirrored")
        # two bursts of 10 a partition, then quiet: copied in transactions of their own, whose last syncs used to
        # be written at most once a second, so that a run's last sync could wait for a next record that never came
        # (StreamTransactionsTest holds the rule without timing)
        produce(source.bootstrap, topic, varied_records(20, 2, seed=13))
        produce(source.bootstrap, topic, varied_records(20, 2, seed=14))
        ends = end_offsets(source.bootstrap, topic)
        wait_until(lambda: committed_offsets(source.bootstrap, group, topic) == ends, 120, "the last burst mirrored")
        if delivery == "exactly-once":  # each committed transaction's length and its commit's time, for the operator
            wait_until(lambda: _transactions_timed(daemon.metrics()), 30, "every committed transaction timed")
            metrics = daemon.metrics()
            assert 0 < metric_value(metrics, "mirrord_transaction_commit_seconds_sum") \
                < metric_value(metrics, "mirrord_transaction_seconds_sum")
        assert daemon.stop() == 0
        shutil.rmtree(tmp_path / "flow" / "state")  # the host's disk is lost; the target cluster is not
        # compacted, and rolled hourly so that compaction reaches the syncs (the broker's default: 7 days)
        assert topic_own_configs(target.bootstrap, offset_syncs_topic(alias)) == {
            "cleanup.policy": "compact", "segment.ms": "3600000"}

        position = {0: 97, 1: 160 + 7}  # partition 1's group is inside the last burst's copy
        commit_offsets(source.bootstrap, consumer_group, topic, position)
        daemon = Mirrord(config).start()
        daemon.wait_ready()
        src, dst = read_all(source.bootstrap, topic), read_committed(target.bootstrap, topic)
        copies = {p: {r.fields(): r.offset for r in dst[p]} for p in (0, 1)}
        # the group's next record is the copy of its next source record: no record before it is skipped
        # (read from the previous copy's offset on, the first record is that copy)
        landing = {p: (copies[p][src[p][o - 1].fields()] + 1 if o else 0, copies[p][src[p][o].fields()])
                   for p, o in position.items()}
        if delivery == "at-least-once":
            assert landing == {0: (13 + 97, 13 + 97), 1: (167, 167)}  # no gaps: the source offsets, shifted
        wait_until(lambda: all(lo <= committed_offsets(target.bootstrap, consumer_group, topic).get(p, -1) <= hi
                               for p, (lo, hi) in landing.items()), 60,
                   f"the group translated onto its next records' copies {landing} from the syncs read back")
        dst = read_committed(target.bootstrap, topic)
        assert [len(dst[p]) for p in (0, 1)] == [13 + len(src[0]), len(src[1])], "nothing copied twice"
        assert daemon.stop() == 0
    finally:
        daemon.stop()


def _transactions_timed(metrics: str) -> bool:
    committed = metric_value(metrics, "mirrord_transactions_total", outcome="committed")
    return bool(committed) and committed == metric_value(metrics, "mirrord_transaction_seconds_count") \
        == metric_value(metrics, "mirrord_transaction_commit_seconds_count")


@pytest.mark.parametrize(("master", "mode", "why"), [  # the flow's num.streams is 2
    ("", "real-time", r"2 streams, 3 task slots"),
    ("local[2]", "micro-batch", r"2 streams need 3 task slots in real-time mode, the Spark master has 2"),
])
def test_the_trigger_mode_and_why_are_in_the_log_the_status_and_a_metric_and_both_modes_mirror_faithfully(
        kafka_pair, unique, tmp_path, master, mode, why):
    source, target = kafka_pair
    topic = unique("mode")
    create_topic(source.bootstrap, topic, 3)
    # recent timestamps: the brokers' 7-day retention deletes a segment of 2023's records at its next check
    base = int(time.time() * 1000) - 60_000
    sent = [{"partition": i % 3, "key": f"k{i}".encode(), "value": f"v{i}".encode(), "headers": [("h", b"\x00")],
             "timestamp": base + i} for i in range(300)]
    produce(source.bootstrap, topic, sent)
    config = write_flow(tmp_path, source.bootstrap, target.bootstrap, topic, group=unique("mode-group"),
                        conf={"spark.master": master})
    notify = NotifySocket(tmp_path / "notify.sock")
    daemon = Mirrord(config, env=notify.env()).start()
    try:
        daemon.wait_ready()
        wait_until(lambda: count(target.bootstrap, topic) >= 300, 120, "the topic copied")
        assert re.search(f"INFO mirrord: {mode} mode: {why}\n", daemon.output()), daemon.output()[-3000:]
        other = "micro-batch" if mode == "real-time" else "real-time"
        metrics = daemon.metrics()
        assert (metric_value(metrics, "mirrord_mode", mode=mode), metric_value(metrics, "mirrord_mode", mode=other)) \
            == (1, 0)
        wait_until(lambda: any(f"{mode} mode" in line for line in notify.lines("STATUS=")), 30, "the mode in STATUS")
        copied = read_all(target.bootstrap, topic)
        original = read_all(source.bootstrap, topic)
        assert {p: [r.fields() for r in rs] for p, rs in copied.items()} == \
            {p: [r.fields() for r in rs] for p, rs in original.items()}
        assert daemon.stop() == 0
    finally:
        daemon.stop()
        notify.close()


def test_gone_writers_offset_syncs_are_retired_and_a_group_translated_from_what_compaction_keeps_lands_as_before(
        kafka_pair, unique, tmp_path):
    """Each writer instance leaves one key per partition in the compacted offset-syncs topic; the active host
    retires the keys idle for 10 minutes (tombstones), after writing what they showed as syncs of its own
    (docs/decisions.md §7). Here four writers of earlier starts copied a quarter each of the first 100 records of
    each partition an hour ago (their copies and newest syncs written by the test, under keys of their own); a
    start resumes from their group's position, copies the rest and retires their keys. The topic as compaction
    leaves it then holds a writer and the retirer's syncs per partition, and a fresh reader of it translates
    every group position exactly where the whole topic did, also inside the retired writers' copies."""
    source, target = kafka_pair
    topic, group, alias = unique("retire"), unique("retire-mirror"), unique("retire-alias")
    syncs_topic = offset_syncs_topic(alias)
    create_topic(source.bootstrap, topic, 2)
    create_topic(target.bootstrap, topic, 2)
    shift = {0: 13, 1: 0}
    produce(target.bootstrap, topic, [{"partition": 0, "key": b"old", "value": b"x"}] * shift[0])  # offsets differ
    produce(source.bootstrap, topic, varied_records(300, 2, seed=21))
    src = read_all(source.bootstrap, topic)
    produce(target.bootstrap, topic, [{"partition": p, "key": r.key, "value": r.value, "headers": list(r.headers),
                                       "timestamp": r.timestamp} for p in (0, 1) for r in src[p][:100]])
    commit_offsets(source.bootstrap, group, topic, {0: 100, 1: 100})  # where the earlier starts stopped
    aged = int(time.time() * 1000) - 3_600_000
    writers = [random.randbytes(8) for _ in range(4)]
    syncs = [encode(OffsetSync(topic, p, 25 * w + 24, 25 * w + 24 + shift[p], 25 * w), writer)
             for w, writer in enumerate(writers) for p in (0, 1)]
    create_topic(target.bootstrap, syncs_topic, 1, {"cleanup.policy": "compact"})  # as the earlier starts made it
    produce(target.bootstrap, syncs_topic, [{"partition": 0, "key": key, "value": value, "headers": headers,
                                             "timestamp": aged} for key, value, headers in syncs])
    gone = {key for key, _, _ in syncs}
    config = write_flow(tmp_path / "flow", source.bootstrap, target.bootstrap, topic, group=group,
                        conf={"source.alias": alias, "emit.checkpoints.interval.seconds": "1"})
    daemon = Mirrord(config).start()
    try:
        daemon.wait_ready()
        ends = end_offsets(source.bootstrap, topic)
        wait_until(lambda: committed_offsets(source.bootstrap, group, topic) == ends, 120, "the rest copied")

        def newest() -> dict[bytes, object]:
            return {r.key: r for r in read_all(target.bootstrap, syncs_topic)[0]}
        wait_until(lambda: all(now[key].value is None for now in [newest()] for key in gone), 60,
                   "the gone writers' keys retired")
        assert daemon.stop() == 0
        log, now = read_all(target.bootstrap, syncs_topic)[0], newest()
        kept = [r for r in log if r.value is not None and now[r.key].offset == r.offset]
        mine = [r for r in kept if decode_sync(r.key, r.value).topic == topic]
        assert len(mine) <= 2 * 3, f"{len(mine)} keys kept, of a writer and the retirer's two incarnations: {mine}"

        def translations(records) -> dict[tuple[int, int], int | None]:
            store = OffsetSyncStore()
            for r in records:
                if r.value is not None:
                    store.add(decode_sync(r.key, r.value, list(r.headers)))
            return {(p, g): store.translate(topic, p, g) for p in (0, 1) for g in range(ends[p] + 1)}
        exact = {(p, g): g + shift[p] for p in (0, 1) for g in range(ends[p] + 1)}
        assert translations(log) == exact  # the whole topic: one for one copies, shifted by the prefill
        after = translations(kept)
        assert after == exact, {pg: (got, exact[pg]) for pg, got in after.items() if got != exact[pg]}
        dst = read_all(target.bootstrap, topic)
        assert [r.fields() for p in (0, 1) for r in dst[p][shift[p]:]] == [r.fields() for p in (0, 1) for r in src[p]]
    finally:
        daemon.stop()
