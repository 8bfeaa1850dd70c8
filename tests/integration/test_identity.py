"""A flow is one identity on the target (docs/decisions.md §6, mirrord/identity.py): its name and the source
cluster's id. Two regions from one template into one central cluster both copy everything; a new flow never
resumes where another flow stopped; an upgraded flow keeps its positions; a rolling upgrade never has an old
and a new host active at once; a positions topic of the wrong shape is refused in one line.

The session's source broker is one region, an extra broker the other; the session's target is the central
cluster."""

from __future__ import annotations

import contextlib
import json
import re
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection
from confluent_kafka.admin import AdminClient

from mirrord.identity import FlowIdentity
from mirrord.kafka.admin import java_uuid
from tests.harness.kafka import KafkaBroker
from tests.harness.mirrord import Mirrord, write_flow
from tests.harness.records import (
    Trickle,
    commit_offsets,
    create_topic,
    produce,
    read_committed,
    wait_until,
)

EOS = {"delivery": "exactly-once"}


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    broker = KafkaBroker("region2", tmp_path_factory.mktemp("region2"), heap="384m")
    try:
        broker.start()
        yield broker
    finally:
        broker.destroy()


def numbered(n: int, partitions: int, tag: str) -> list[dict]:
    return [{"partition": i % partitions, "key": f"{tag}-k{i}".encode(), "value": f"{tag}-v{i}".encode(),
             "headers": [("seq", str(i).encode())]} for i in range(n)]


def keys(bootstrap: str, topic: str) -> list[bytes]:
    return [r.key for records in read_committed(bootstrap, topic).values() for r in records]


def copied(bootstrap: str, topic: str, wanted: int) -> bool:
    return len(keys(bootstrap, topic)) >= wanted


def cluster_id(bootstrap: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a collected client fails its futures
    return admin.describe_cluster().result(timeout=30).cluster_id


@pytest.mark.parametrize("delivery,same_group", [("at-least-once", True), ("exactly-once", False)],
                         ids=["at-least-once-one-group.id", "exactly-once"])
def test_two_regions_from_one_template_both_copy_everything(kafka_pair, region, tmp_path, unique, delivery,
                                                            same_group):
    """The packaged `flow` and aliases in both; one `group.id` (MirrorMaker 1's template), or two in exactly-once
    mode: neither stands by for the other, nor fences the other's producers."""
    source, target = kafka_pair
    tag = unique("region")
    topics = {"eu": f"{tag}-eu", "uk": f"{tag}-uk"}
    clusters = {"eu": source, "uk": region}
    daemons = {}
    for name, cluster in clusters.items():
        create_topic(cluster.bootstrap, topics[name], 3)
        produce(cluster.bootstrap, topics[name], numbered(1500, 3, name))
        group = "mirrormaker" if same_group else f"mm-{name}-{tag}"
        daemons[name] = Mirrord(write_flow(tmp_path / name, cluster.bootstrap, target.bootstrap, f"{tag}-.*",
                                           group=group, conf={"delivery": delivery, "num.streams": "1"}))
    trickles = []
    try:
        daemons["eu"].start().wait_ready(180)
        wait_until(lambda: copied(target.bootstrap, topics["eu"], 1500), 120, "eu's backlog copied")
        daemons["uk"].start()
        wait_until(lambda: copied(target.bootstrap, topics["uk"], 1500), 120, "uk's backlog copied (it stood by?)")
        trickles = [Trickle(clusters[n].bootstrap, topics[n], 3, total=600, rate=200).start() for n in clusters]
        for t in trickles:
            t.join(60)
        for name in clusters:  # both live streams, side by side
            wait_until(lambda n=name: copied(target.bootstrap, topics[n], 2100), 90, f"{name}'s stream copied")
        for name, daemon in daemons.items():
            got = keys(target.bootstrap, topics[name])
            assert len(got) == len(set(got)) == 2100, (name, len(got), len(set(got)))
            assert daemon.alive(), daemon.output()[-3000:]
            assert "another host mirrors" not in daemon.output()
            assert "was fenced" not in daemon.output() and "ProducerFenced" not in daemon.output(), \
                daemon.output()[-3000:]
        for name, daemon in daemons.items():
            group = "mirrormaker" if same_group else f"mm-{name}-{tag}"
            assert re.search(r"this flow is (.*)", daemon.output()).group(1) == \
                f"flow test of source cluster {cluster_id(clusters[name].bootstrap)}, group.id {group}"
    finally:
        for t in trickles:
            t.stop()
        for d in daemons.values():
            d.stop()


def test_a_new_exactly_once_flow_after_another_copies_everything(kafka_pair, tmp_path, unique):
    """Flow one copies a topic and stops; flow two (its own name, group.id and state) copies it whole again."""
    source, target = kafka_pair
    topic = unique("newflow")
    create_topic(source.bootstrap, topic, 4)
    produce(source.bootstrap, topic, numbered(2000, 4, "r"))
    for flow in ("one", "two"):
        d = Mirrord(write_flow(tmp_path / flow, source.bootstrap, target.bootstrap, topic, group=f"{topic}-{flow}",
                               conf={**EOS, "flow": flow}))
        try:
            d.start().wait_ready(180)
            wanted = 2000 * (1 if flow == "one" else 2)
            wait_until(lambda w=wanted: copied(target.bootstrap, topic, w), 120, f"flow {flow} copying the topic")
            assert d.stop() == 0
        finally:
            d.stop()
    got = keys(target.bootstrap, topic)
    assert len(got) == 4000 and all(got.count(k) == 2 for k in set(got))


def test_an_upgraded_exactly_once_flow_resumes_from_the_positions_of_the_release_before(kafka_pair, tmp_path,
                                                                                        unique):
    """The release before kept positions in `mirrord-positions.<source.alias>.internal` and committed them to
    the source group with `mirrord topic-id=<id>`, the group a little behind (its commits every 250 ms). The
    state it left is written here as it wrote it: records 0-599 of each partition copied, positions at 600,
    the group at 500. The upgraded flow copies 600 onwards, once."""
    source, target = kafka_pair
    topic, group = unique("upgrade"), unique("upgrade-group")
    alias = "old" + uuid.uuid4().hex[:6]
    records = numbered(4000, 4, "u")
    create_topic(source.bootstrap, topic, 4)
    produce(source.bootstrap, topic, records)
    create_topic(target.bootstrap, topic, 4)
    produce(target.bootstrap, topic, [r for i, r in enumerate(records) if i // 4 < 600])
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    java_id = java_uuid(admin.describe_topics(TopicCollection([topic]))[topic].result().topic_id)
    legacy = f"mirrord-positions.{alias}.internal"
    create_topic(target.bootstrap, legacy, 1, {"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": target.bootstrap})
    for partition in range(4):
        p.produce(legacy, key=f"{topic}:{partition}".encode(),
                  value=json.dumps({"offset": 600, "topicId": java_id}).encode())
    assert p.flush(30) == 0
    commit_offsets(source.bootstrap, group, topic, {q: 500 for q in range(4)}, metadata=f"mirrord topic-id={java_id}")
    d = Mirrord(write_flow(tmp_path / "upgraded", source.bootstrap, target.bootstrap, topic, group=group,
                           conf={**EOS, "source.alias": alias}))
    try:
        d.start().wait_ready(180)
        d.wait_logged("resuming 4 partitions from the positions the earlier release committed", 30)
        wait_until(lambda: copied(target.bootstrap, topic, 4000), 120, "the rest of the topic copied")
        assert d.stop() == 0
    finally:
        d.stop()
    got = keys(target.bootstrap, topic)
    assert len(got) == len(set(got)) == 4000, (len(got), len(set(got)))


def test_a_rolling_upgrade_never_has_an_old_and_a_new_host_active(kafka_pair, tmp_path, unique):
    """A host of the release before holds the old election (`<group.id>.leader` on `mirrord-leader.<group.id>
    .internal`): the upgraded host stands by, saying so in the journal and STATUS, and mirrors once it leaves."""
    source, target = kafka_pair
    topic, group = unique("rolling"), unique("rolling-group")
    create_topic(source.bootstrap, topic, 2)
    produce(source.bootstrap, topic, numbered(500, 2, "o"))
    old_topic = f"mirrord-leader.{group}.internal"
    create_topic(target.bootstrap, old_topic, 1, {"cleanup.policy": "compact"})
    old = Consumer({"bootstrap.servers": target.bootstrap, "group.id": f"{group}.leader",
                    "client.id": "mirrord-leader-0123456789ab", "enable.auto.commit": False})
    d = Mirrord(write_flow(tmp_path / "new", source.bootstrap, target.bootstrap, topic, group=group))
    try:
        old.subscribe([old_topic])
        wait_until(lambda: old.poll(0.2) is None and old.assignment(), 30, "the old host holding its election")
        d.start()
        d.wait_logged(f"standing by: hosts of an earlier mirrord release are in election group {group}.leader", 120)
        d.wait_logged(f"standby: hosts of an earlier mirrord release are in election group {group}.leader", 30)
        assert "mirroring " not in d.output()
        old.close()
        d.wait_ready(120)
        wait_until(lambda: copied(target.bootstrap, topic, 500), 120, "the upgraded host copying")
    finally:
        with contextlib.suppress(RuntimeError):  # closed already
            old.close()
        d.stop()


def test_a_positions_topic_of_another_shape_is_refused_in_one_line(kafka_pair, tmp_path, unique):
    source, target = kafka_pair
    topic, flow = unique("shape"), "shape" + uuid.uuid4().hex[:6]
    create_topic(source.bootstrap, topic, 1)
    positions = FlowIdentity.of(flow, cluster_id(source.bootstrap), topic).positions_topic
    create_topic(target.bootstrap, positions, 3, {"cleanup.policy": "compact"})
    d = Mirrord(write_flow(tmp_path / "shape", source.bootstrap, target.bootstrap, topic, group=topic,
                           conf={**EOS, "flow": flow}))
    try:
        assert d.start().process.wait(180) == 78, d.output()[-3000:]
    finally:
        d.stop()
    lines = [line for line in d.output().splitlines() if positions in line and "cleanup.policy" in line]
    assert lines and "has 3 partitions" in lines[-1] and "1 partition and cleanup.policy=compact" in lines[-1]
