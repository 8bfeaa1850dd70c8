"""The usual topologies end to end: active/active L↔R, two regions aggregated into a central cluster,
and a consumer group failing over onto a target topic whose offsets differ from the source's.

L and R are the session's source and target brokers; the second region is one extra broker. Three
mirrord processes for the module: L→R and R→L (prefix policy, distinct aliases), and C→R.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from mirrord.mm2 import heartbeats, offsets
from mirrord.settings.policy import checkpoints_topic, offset_syncs_topic
from tests.harness.kafka import ROOT, KafkaBroker, classpath, java
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

FAST = {"emit.checkpoints.interval.seconds": "2", "offset.commit.interval.ms": "300", "num.streams": "1"}


def flow(directory, source: KafkaBroker, target: KafkaBroker, prefix: str, source_alias: str, target_alias: str,
         **conf: str):
    return write_flow(directory, source.bootstrap, target.bootstrap, f".*{prefix}.*",
                      group=f"{prefix}-{source_alias}-mirror",
                      conf={"replication.policy": "prefix", "source.alias": source_alias,
                            "target.alias": target_alias, "flow": f"{source_alias}-{target_alias}",
                            "groups": f"{prefix}-app.*", **FAST, **conf})


@pytest.fixture(scope="module")
def topology(kafka_pair, tmp_path_factory):
    left, right = kafka_pair
    work = tmp_path_factory.mktemp("topology")
    region = KafkaBroker("region", work / "region", heap="384m")
    tag = uuid.uuid4().hex[:6]
    t = type("Topology", (), {})()
    t.left, t.right, t.region = left, right, region
    t.prefix = f"topo{tag}"
    t.L, t.R, t.C = f"left{tag}", f"right{tag}", f"region{tag}"
    daemons = []
    try:
        region.start()
        t.lr = Mirrord(flow(work / "lr", left, right, t.prefix, t.L, t.R))
        t.rl = Mirrord(flow(work / "rl", right, left, t.prefix, t.R, t.L))
        t.cr = Mirrord(flow(work / "cr", region, right, t.prefix, t.C, t.R))
        for d in (t.lr, t.rl, t.cr):
            daemons.append(d.start())
        for d in daemons:
            d.wait_ready(240)
        yield t
        for d in daemons:
            assert d.stop() == 0, d.output()[-2000:]
    finally:
        for d in daemons:
            d.stop()
        region.destroy()


def topics(bootstrap: str, pattern: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {name for name in md.topics if re.fullmatch(pattern, name)}


def values(bootstrap: str, pattern: str) -> set[bytes]:
    """What a consumer subscribed to `pattern` on this cluster reads."""
    out = set()
    for topic in topics(bootstrap, pattern):
        for records in read_all(bootstrap, topic).values():
            out.update(r.value for r in records)
    return out


def numbered(origin: str, n: int, partitions: int = 2) -> list[dict]:
    return [{"partition": i % partitions, "key": f"k{i}".encode(), "value": f"{origin}-{i}".encode()}
            for i in range(n)]


def test_active_active_consumers_of_either_side_see_every_record_and_nothing_loops(topology):
    t = topology
    topic = f"{t.prefix}-TOPIC1"
    for cluster in (t.left, t.right):
        create_topic(cluster.bootstrap, topic, 2)
    produce(t.left.bootstrap, topic, numbered("left", 40))
    produce(t.right.bootstrap, topic, numbered("right", 30))
    everything = {r["value"] for r in numbered("left", 40) + numbered("right", 30)}
    pattern = f".*{re.escape(topic)}"
    for cluster in (t.left, t.right):
        wait_until(lambda c=cluster: values(c.bootstrap, pattern) == everything, 180,
                   f"consumers of .*TOPIC1 on {cluster.name} to see all 70 records")
    assert topics(t.right.bootstrap, pattern) == {topic, f"{t.L}.{topic}"}
    assert topics(t.left.bootstrap, pattern) == {topic, f"{t.R}.{topic}"}
    produce(t.left.bootstrap, topic, numbered("left-late", 10))  # and while both flows keep running
    everything |= {r["value"] for r in numbered("left-late", 10)}
    wait_until(lambda: values(t.right.bootstrap, pattern) == everything, 120, "the late records on the right")
    time.sleep(3)  # a loop would show within a few batches
    for cluster in (t.left, t.right):
        looped = topics(cluster.bootstrap, rf"(.*\.)?({t.L}\.{t.R}|{t.R}\.{t.L})\..*")
        assert not looped, f"{cluster.name} has copies of copies: {looped}"


def test_heartbeats_show_each_flow_alive_end_to_end(topology):
    t = topology
    # each cluster holds its peers' heartbeats, never its own copied back
    wait_until(lambda: f"{t.L}.heartbeats" in topics(t.right.bootstrap, ".*heartbeats"), 120, "L.heartbeats on R")
    wait_until(lambda: f"{t.C}.heartbeats" in topics(t.right.bootstrap, ".*heartbeats"), 120, "C.heartbeats on R")
    wait_until(lambda: f"{t.R}.heartbeats" in topics(t.left.bootstrap, ".*heartbeats"), 120, "R.heartbeats on L")
    assert not topics(t.right.bootstrap, rf".*{t.R}\..*heartbeats"), "R's heartbeats came back to R"
    assert not topics(t.left.bootstrap, rf".*{t.L}\..*heartbeats"), "L's heartbeats came back to L"
    ages = {}
    for name, daemon in (("lr", t.lr), ("cr", t.cr)):
        ages[name] = wait_until(lambda d=daemon: (metric_value(d.metrics(), "mirrord_heartbeat_age_seconds") or 99)
                                < 15 and metric_value(d.metrics(), "mirrord_heartbeat_age_seconds"), 120,
                                f"{name}: a fresh heartbeat through the flow")
    assert metric_value(t.lr.metrics(), "mirrord_cycle_detected") == 0


def test_two_regions_aggregate_into_the_central_cluster(topology):
    t = topology
    topic = f"{t.prefix}-orders"
    create_topic(t.left.bootstrap, topic, 2)
    create_topic(t.region.bootstrap, topic, 3)
    produce(t.left.bootstrap, topic, numbered("east", 50))
    produce(t.region.bootstrap, topic, numbered("west", 60, partitions=3))
    for alias, source, n in ((t.L, t.left, 50), (t.C, t.region, 60)):
        copy = f"{alias}.{topic}"
        wait_until(lambda c=copy, n=n: sum(end_offsets(t.right.bootstrap, c).values()) >= n, 180, f"{copy} on R")
        src, dst = read_all(source.bootstrap, topic), read_all(t.right.bootstrap, copy)
        assert topic_partitions(t.right.bootstrap, copy) == len(src)
        for p in src:
            assert [r.fields() for r in dst[p]] == [r.fields() for r in src[p]], f"{copy} partition {p}"


def test_only_committed_transactions_are_mirrored_and_translation_is_never_ahead(topology):
    t = topology
    topic = f"{t.prefix}-payments"
    create_topic(t.left.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": t.left.bootstrap, "transactional.id": f"{topic}-tx"})
    p.init_transactions(30)
    for batch, commit in (("a", True), ("b", False), ("c", True), ("d", False)):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, key=f"{batch}{i}".encode(), value=f"{batch}-{i}".encode(), partition=0)
        assert p.flush(30) == 0  # written to the log before the abort: librdkafka purges what is still queued
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    # source: a0-a9 @0-9, marker @10, b @11-20, marker @21, c @22-31, marker @32, d @33-42, marker @43
    assert end_offsets(t.left.bootstrap, topic) == {0: 44}
    copy = f"{t.L}.{topic}"
    wait_until(lambda: sum(end_offsets(t.right.bootstrap, copy).values()) >= 20, 240, "the committed records mirrored")
    time.sleep(5)  # the aborted batch d comes after c: give it time to (wrongly) arrive
    mirrored = [r.value for r in read_all(t.right.bootstrap, copy)[0]]
    assert mirrored == [f"{b}-{i}".encode() for b in "ac" for i in range(10)]

    group = f"{t.prefix}-app-tx"
    commit_offsets(t.left.bootstrap, group, topic, {0: 22})  # consumed a, about to read c
    resume = translate(t.lr, group)[(topic, 0)]
    assert resume == 10, "exactly at the first record of c, which is at 10 in the target"
    commit_offsets(t.left.bootstrap, group, topic, {0: 11})  # after a's commit marker
    assert translate(t.lr, group)[(topic, 0)] <= 10, "never ahead of the group's position"


def offsets_command(daemon: Mirrord, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirrord", "offsets", "translate", "--config", str(daemon.config),
                           *args], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)


def translate(daemon: Mirrord, group: str, *args: str) -> dict[tuple[str, int], int | None]:
    """`mirrord offsets translate` as a runbook reads it: (source topic, partition) → target offset."""
    done = offsets_command(daemon, "--group", group, *args)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split("\t") == ["TOPIC", "PARTITION", "SOURCE-OFFSET", "TARGET-TOPIC", "TARGET-OFFSET",
                                    "TARGET-COMMITTED"]
    rows = [line.split("\t") for line in lines[1:] if "\t" in line]
    return {(r[0], int(r[1])): None if r[4] == "-" else int(r[4]) for r in rows}


def test_a_group_a_few_records_behind_fails_over_exactly_onto_a_prefilled_target(topology):
    """test_mirror.py's failover walkthrough with the tools a runbook uses: `mirrord offsets translate
    --apply`, and MirrorMaker 2's RemoteClusterUtils reading the checkpoints topic."""
    t = topology
    topic = f"{t.prefix}-walkthrough"
    copy = f"{t.L}.{topic}"
    # the target already holds other records, offsets differ; made before the source topic exists, since the
    # running mirror creates the target topic itself as soon as it sees the source's
    create_topic(t.right.bootstrap, copy, 2)
    produce(t.right.bootstrap, copy, [{"partition": i % 2, "key": b"old", "value": b"already here"}
                                      for i in range(61)])
    before = end_offsets(t.right.bootstrap, copy)
    assert before == {0: 31, 1: 30}
    create_topic(t.left.bootstrap, topic, 2)
    produce(t.left.bootstrap, topic, numbered("src", 20))  # 10 per partition
    wait_until(lambda: committed_offsets(t.left.bootstrap, f"{t.prefix}-{t.L}-mirror", topic) == {0: 10, 1: 10},
               120, "the topic mirrored")
    group = f"{t.prefix}-app-billing"
    consumed = {0: 5, 1: 7}
    commit_offsets(t.left.bootstrap, group, topic, consumed, metadata="billing-v2 epoch=7")
    expected = {p: before[p] + n for p, n in consumed.items()}

    assert translate(t.lr, group, "--topic", re.escape(topic)) == {(topic, p): o for (p, o) in expected.items()}

    # a consumer of the group already runs on the target: --apply refuses, and says why
    app = Consumer({"bootstrap.servers": t.right.bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        app.subscribe([copy])
        wait_until(lambda: app.poll(0.5) is not None or app.assignment(), 60, "the consumer to join")
        refused = offsets_command(t.lr, "--group", group, "--topic", re.escape(topic), "--apply")
        assert refused.returncode == 75, refused.stderr
        assert "active members on the target" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    finally:
        app.close()
    commit_offsets(t.right.bootstrap, group, copy, {0: 0, 1: 0})  # where the refused consumer left it
    applied = offsets_command(t.lr, "--group", group, "--topic", re.escape(topic), "--apply")
    assert applied.returncode == 0, applied.stderr
    assert committed_offsets(t.right.bootstrap, group, copy) == expected
    src, dst = read_all(t.left.bootstrap, topic), read_all(t.right.bootstrap, copy)
    for p, n in consumed.items():
        assert dst[p][expected[p]].fields() == src[p][n].fields(), f"partition {p}: not the next record"

    # the same translation in the checkpoints topic, read by MirrorMaker 2's own client library
    def remote_cluster_utils():
        done = subprocess.run([java(), "-cp", classpath(),
                               str(ROOT / "tests" / "harness" / "TranslateOffsets.java"), t.right.bootstrap, t.L,
                               group], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        rows = [line.split("\t", 1) for line in done.stdout.splitlines()]
        return {(where.split()[0], int(where.split()[1])): (int(where.split()[2]), metadata)
                for where, metadata in rows}
    # the offset and the metadata the group committed with it, as MirrorMaker 2's checkpoints carry them
    wait_until(lambda: remote_cluster_utils() == {(copy, p): (o, "billing-v2 epoch=7") for p, o in expected.items()},
               60, "RemoteClusterUtils.translateOffsets to read the checkpoints", interval=2)



def decoded(bootstrap: str, kind: str, topic: str) -> dict[tuple[int, int], list[str]]:
    """(partition, offset) → the fields Kafka's own MirrorMaker 2 classes decode from each record of `topic`."""
    mirror_jar = next((ROOT / ".cache" / "jars" / "mm2").glob("connect-mirror-4*.jar"))
    done = subprocess.run([java(), "-cp", f"{classpath()}:{mirror_jar}",
                           str(ROOT / "tests" / "harness" / "DecodeMirrorTopics.java"), bootstrap, kind, topic],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return {(int(p), int(o)): fields for p, o, *fields in (line.split("\t") for line in done.stdout.splitlines())}


def test_heartbeats_checkpoints_and_offset_syncs_decode_with_mirrormaker_2s_own_classes(topology):
    """What mirrord writes for MirrorMaker 2's tools, read by Kafka's Heartbeat, Checkpoint and OffsetSync:
    the same fields as mirrord's own decoders read, and offset syncs that point at true copies."""
    t = topology
    topic = f"{t.prefix}-decoded"
    copy = f"{t.L}.{topic}"
    create_topic(t.left.bootstrap, topic, 2)
    produce(t.left.bootstrap, topic, numbered("dec", 40))
    wait_until(lambda: committed_offsets(t.left.bootstrap, f"{t.prefix}-{t.L}-mirror", topic) == {0: 20, 1: 20},
               120, "the topic mirrored")
    group = f"{t.prefix}-app-decoder"
    commit_offsets(t.left.bootstrap, group, topic, {0: 20, 1: 13}, metadata="decoder@3")

    def checkpoints() -> dict[tuple[str, int], tuple[int, int, str]]:
        out = {}
        for _, fields in sorted(decoded(t.right.bootstrap, "checkpoint", checkpoints_topic(t.L)).items()):
            if fields[0] == group:
                out[(fields[1], int(fields[2]))] = (int(fields[3]), int(fields[4]), fields[5])
        return out
    wait_until(lambda: checkpoints() == {(copy, 0): (20, 20, "decoder@3"), (copy, 1): (13, 13, "decoder@3")}, 60,
               "the group's checkpoints, decoded by Kafka's Checkpoint", interval=2)

    syncs_topic = offset_syncs_topic(t.L)
    # a retired writer's key, as the active host leaves it (docs/decisions.md §7): a tombstone, no sync to decode
    gone = struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", 0) + bytes(8)
    produce(t.right.bootstrap, syncs_topic, [{"partition": 0, "key": gone, "value": None}])
    mine = {(r.partition, r.offset): offsets.decode(r.key, r.value, r.headers)  # tombstones are not syncs
            for records in read_all(t.right.bootstrap, syncs_topic).values() for r in records if r.value is not None}
    theirs = decoded(t.right.bootstrap, "offset-sync", syncs_topic)
    assert mine and set(mine) <= set(theirs)
    for at, sync in mine.items():
        assert theirs[at] == [sync.topic, str(sync.partition), str(sync.upstream), str(sync.downstream)], at
    src, dst = read_all(t.left.bootstrap, topic), read_all(t.right.bootstrap, copy)
    ours = [fields for fields in theirs.values() if fields[0] == topic]
    assert ours
    for _, partition, upstream, downstream in ours:  # each sync points at the copy of the record it names
        p = int(partition)
        assert dst[p][int(downstream)].fields() == src[p][int(upstream)].fields(), (partition, upstream, downstream)

    beats = {(r.partition, r.offset): heartbeats.decode(r.key, r.value)
             for records in read_all(t.right.bootstrap, "heartbeats").values() for r in records}
    theirs = decoded(t.right.bootstrap, "heartbeat", "heartbeats")
    assert beats and set(beats) <= set(theirs)
    for at, beat in beats.items():
        assert theirs[at] == [beat.source_alias, beat.target_alias, str(beat.timestamp)], at
    assert {(t.L, t.R), (t.C, t.R)} <= {(b.source_alias, b.target_alias) for b in beats.values()}


def test_translation_is_never_past_the_end_of_a_recreated_target_topic(topology):
    """Issue 31, item 3: the target topic deleted and made again under a running mirrord. Translation and the
    checkpoints rest on the new topic's syncs; the old topic's never put a group past the new topic's end, and
    a checkpoint moves back to where the new topic holds the group's next record (docs/decisions.md §7)."""
    t = topology
    topic = f"{t.prefix}-recreated-target"
    copy = f"{t.L}.{topic}"
    create_topic(t.left.bootstrap, topic, 2)
    produce(t.left.bootstrap, topic, numbered("old", 20))  # 10 per partition
    wait_until(lambda: end_offsets(t.right.bootstrap, copy) == {0: 10, 1: 10}, 120, "the topic mirrored")
    caught_up, behind = f"{t.prefix}-app-caught-up", f"{t.prefix}-app-behind"
    commit_offsets(t.left.bootstrap, caught_up, topic, {0: 10, 1: 10})
    commit_offsets(t.left.bootstrap, behind, topic, {0: 6, 1: 6})
    wait_until(lambda: checkpoints(t, caught_up) == {(copy, 0): 10, (copy, 1): 10}, 60, "the first checkpoints",
               interval=2)

    admin = AdminClient({"bootstrap.servers": t.right.bootstrap})
    admin.delete_topics([copy])[copy].result()
    wait_until(lambda: topic_partitions(t.right.bootstrap, copy) == 0, 30, "the target topic gone")
    create_topic(t.right.bootstrap, copy, 2)
    produce(t.left.bootstrap, topic, numbered("new", 2))  # source 10 → the new target topic's 0
    wait_until(lambda: end_offsets(t.right.bootstrap, copy) == {0: 1, 1: 1}, 120, "the first new records mirrored")
    # copied below the old topic's offsets: the writer asks the target for the topic's id at once and says so
    t.lr.wait_logged(f"target topic {copy} was recreated", 30)
    produce(t.left.bootstrap, topic, numbered("new", 4))  # source 11-12 → 1-2, their syncs naming the new topic
    wait_until(lambda: end_offsets(t.right.bootstrap, copy) == {0: 3, 1: 3}, 120, "the new records mirrored")
    commit_offsets(t.left.bootstrap, caught_up, topic, {0: 13, 1: 13})

    # never past the new topic's end (3): the old topic's syncs put the group at 13 - 10 + 10 = 13; the new topic's
    # put it exactly at its end. The behind group's next records (source 6-9) went with the deleted topic: it reads
    # the new topic from its start. Neither is one record ahead on a sync written before its writer knew the old
    # topic's id (it once was: issue 31, docs/decisions.md §7).
    exact = {(copy, 0): 3, (copy, 1): 3}
    wait_until(lambda: checkpoints(t, caught_up) == exact, 60, "the checkpoints at the new topic's end", interval=2)
    assert translate(t.lr, caught_up) == {(topic, 0): 3, (topic, 1): 3}
    assert translate(t.lr, behind) == {(topic, 0): 0, (topic, 1): 0}
    wait_until(lambda: checkpoints(t, behind) == {(copy, 0): 0, (copy, 1): 0}, 30,
               "the behind group's checkpoints at the new topic's start", interval=2)


def checkpoints(t, group: str) -> dict[tuple[str, int], int]:
    """(target topic, partition) → offset, as MirrorMaker 2's RemoteClusterUtils reads the checkpoints topic."""
    done = subprocess.run([java(), "-cp", classpath(), str(ROOT / "tests" / "harness" / "TranslateOffsets.java"),
                           t.right.bootstrap, t.L, group], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split("\t", 1)[0].split() for line in done.stdout.splitlines()]
    return {(topic, int(partition)): int(offset) for topic, partition, offset in rows}
