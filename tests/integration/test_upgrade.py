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
        assert [(r.key, r.value) for r in dst[p]] == [(r.key, r.value) for r in src[p]], f"partition {p}"
