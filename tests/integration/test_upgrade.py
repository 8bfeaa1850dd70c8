"""Upgrade without a re-copy: a flow whose checkpoint was written by Spark's Kafka source (mirrord's releases
before its own source) starts under mirrord's source with nothing lost and nothing copied twice."""

from __future__ import annotations

from tests.harness.mirrord import Mirrord, write_flow
from tests.harness.records import create_topic, produce, read_all, wait_until


def test_a_checkpoint_written_by_sparks_kafka_source_resumes_under_mirrords_source_without_a_copy_twice(
        kafka_pair, spark, unique, tmp_path):
    source, target = kafka_pair
    topic = unique("upgrade")
    create_topic(source.bootstrap, topic, 3)
    create_topic(target.bootstrap, topic, 3)
    produce(source.bootstrap, topic, [{"partition": i % 3, "key": f"k{i}".encode(), "value": f"before-{i}".encode()}
                                      for i in range(300)])
    config = write_flow(tmp_path / "flow", source.bootstrap, target.bootstrap, topic, group=unique("upgrade-group"))
    checkpoint = tmp_path / "flow" / "state" / "test" / "checkpoint"  # flow "test": <state.dir>/<flow>/checkpoint

    # what today's releases ran: Spark's Kafka source, its checkpoint where mirrord keeps it
    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", source.bootstrap)
             .option("subscribePattern", topic).option("startingOffsets", "earliest").load()
             .selectExpr("topic", "key", "value", "partition").writeStream.format("kafka")
             .option("kafka.bootstrap.servers", target.bootstrap).option("checkpointLocation", str(checkpoint))
             .start())
    query.processAllAvailable()
    query.stop()
    assert sum(len(r) for r in read_all(target.bootstrap, topic).values()) == 300
    assert (checkpoint / "commits").is_dir() and (checkpoint / "sources" / "0").is_dir()

    produce(source.bootstrap, topic, [{"partition": i % 3, "key": f"k{i}".encode(), "value": f"after-{i}".encode()}
                                      for i in range(300, 450)])
    upgraded_copies_the_rest_once(config, source, target, topic)


def test_a_checkpoint_written_through_sparks_kafka_sink_resumes_under_mirrords_writer_without_a_copy_twice(
        kafka_pair, spark, unique, tmp_path):
    """Issue 32, item 6, at least once: the releases before mirrord's one writer wrote through Spark's Kafka sink
    (format kafka); their checkpoint, of mirrord's source, resumes under the writer where it stopped. Spark allows
    a Kafka sink to become a foreach sink in a checkpoint (docs/decisions.md §12)."""
    source, target = kafka_pair
    topic = unique("upgrade-sink")
    create_topic(source.bootstrap, topic, 3)
    create_topic(target.bootstrap, topic, 3)
    before = [{"partition": i % 3, "key": f"k{i}".encode(), "value": f"before-{i}".encode(),
               "headers": [("h", f"{i}".encode())]} for i in range(300)]
    produce(source.bootstrap, topic, before)
    group = unique("upgrade-sink-group")
    config = write_flow(tmp_path / "flow", source.bootstrap, target.bootstrap, topic, group=group)
    checkpoint = tmp_path / "flow" / "state" / "test" / "checkpoint"

    # what the release before ran: mirrord's source, then Spark's Kafka sink, its checkpoint where mirrord keeps it
    query = (spark.readStream.format("mirrord").option("kafka.bootstrap.servers", source.bootstrap)
             .option("kafka.group.id", group).option("subscribePattern", topic).option("num.streams", "2")
             .option("startingOffsets", "earliest").load()
             .selectExpr("topic", "key", "value", "headers", "partition").writeStream.format("kafka")
             .option("kafka.bootstrap.servers", target.bootstrap).option("checkpointLocation", str(checkpoint))
             .outputMode("update").trigger(realTime="5 seconds").start())  # real-time mode, the default trigger
    try:
        wait_until(lambda: sum(len(r) for r in read_all(target.bootstrap, topic, timeout=5).values()) >= 300, 90,
                   "the release before to copy the first records")
        wait_until(lambda: (checkpoint / "commits" / "1").is_file(), 30, "a batch after the copy committed")
    finally:
        query.stop()

    after = [{"partition": i % 3, "key": f"k{i}".encode(), "value": f"after-{i}".encode(),
              "headers": [("h", f"{i}".encode())]} for i in range(300, 450)]
    produce(source.bootstrap, topic, after)
    upgraded_copies_the_rest_once(config, source, target, topic)


def upgraded_copies_the_rest_once(config, source, target, topic: str) -> None:
    """The daemon started on the release before's state copies the 450 records' rest: every partition on the target
    as on the source, key, value and headers, in order, nothing twice and nothing missing."""
    daemon = Mirrord(config).start()
    try:
        daemon.wait_ready()
        wait_until(lambda: sum(len(r) for r in read_all(target.bootstrap, topic, timeout=5).values()) >= 450, 90,
                   "the records produced after the upgrade")
        assert daemon.stop() == 0, daemon.output()[-2000:]
    finally:
        daemon.stop()
    src, dst = read_all(source.bootstrap, topic), read_all(target.bootstrap, topic)
    for p in range(3):
        assert [(r.key, r.value, r.headers) for r in dst[p]] == [(r.key, r.value, r.headers) for r in src[p]], p
