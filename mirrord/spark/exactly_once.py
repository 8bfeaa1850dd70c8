"""Exactly once (`delivery = exactly-once`, docs/decisions.md §12): what the query needs besides its sink.

mirrord's writer (jvm/, `io.mirrord.sink.MirrorWriter`, pipeline.py) writes each stream's records
in Kafka transactions on the target, under the transactional id `<prefix>-<stream>`, with the source
positions they reach in the flow's positions topic and the offset syncs that pair them; the prefix and the
topic are the flow's own (mirrord/identity.py: its name and the source cluster's id). Before a query
starts, this module fences every earlier producer of the flow's ids (the broker aborts their open
transactions and refuses their commits for ever), and only then reads the positions the target holds,
`read_committed`: the start resumes from them, whatever Spark's checkpoint or the source group says.
A position is `{"offset": <next offset>, "topicId": "<the source topic's id>"}` (the id when the writer knew it).
"""

from __future__ import annotations

import json
import logging

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from mirrord.errors import ConfigError, MirrordError
from mirrord.identity import Legacy
from mirrord.kafka import admin
from mirrord.kafka.admin import TP
from mirrord.settings.flow import Flow
from mirrord.spark import resume

log = logging.getLogger(__name__)
FENCE_TIMEOUT_MS = 60_000
READ_TIMEOUT = 60.0
# The producer's blocking calls (initTransactions, a commit) wait at most this long for a target away; Spark's
# sink default (forever) would hold a task through an outage the supervisor already handles.
MAX_BLOCK_MS = 60_000


def ensure_positions_topic(target: admin.Cluster, topic: str) -> None:
    """The flow's positions topic on the target, made if missing: one partition (one reader reads it whole, in
    order), compacted (only each partition's newest position counts). One of another shape is refused: a
    second partition or a deleting cleanup policy could hide positions, and the start would copy again."""
    admin.ensure_internal_topic(target, topic, "positions")
    partitions = target.partitions().get(topic, 1)
    policy = target.topic_configs([topic]).get(topic, {}).get("cleanup.policy", "delete")
    if partitions != 1 or "compact" not in policy.split(","):
        raise ConfigError(None, None, f"the positions topic {topic} on the target has {partitions} partitions and "
                                      f"cleanup.policy={policy}; exactly once needs 1 partition and "
                                      f"cleanup.policy=compact (make it so, or delete it to copy from the source "
                                      f"group's offsets)")


def producer_config(flow: Flow) -> dict[str, str]:
    """The target's producer properties for the transactional producers: max.block.ms bounded."""
    config = flow.target_properties
    config["max.block.ms"] = str(min(int(config.get("max.block.ms", MAX_BLOCK_MS)), MAX_BLOCK_MS))
    return config


def fence_zombies(spark, flow: Flow, prefix: str, streams: int) -> list[str]:
    """Every producer that wrote this flow's streams before (transactional ids `<prefix>-<n>`), fenced by the
    target's brokers (their open transactions aborted); the ids fenced. The JVM's own idle producers go first.
    `streams` 0: only the ids the target lists (an earlier release's)."""
    spark._jvm.io.mirrord.sink.MirrorWriter.closeAll()
    try:
        ids = list(spark._jvm.io.mirrord.sink.Zombies.fence(producer_config(flow), prefix, streams, FENCE_TIMEOUT_MS))
    except Exception as exc:  # noqa: BLE001 - py4j wraps Kafka's errors
        reason = str(getattr(exc, "java_exception", exc)).splitlines()[0]
        raise MirrordError(f"cannot fence the earlier producers of flow {flow.name} on the target: {reason}") from None
    if ids:
        log.info("fenced the earlier producers of this flow on the target: %s", ", ".join(ids))
    return ids


def earlier_release_positions(spark, flow: Flow, source: admin.Cluster, target: admin.Cluster,
                              topics: dict[str, int], ids: dict[str, str],
                              committed: dict[TP, Position]) -> dict[TP, Position]:
    """Upgrade in place: the positions this flow committed under the release before's names (`Legacy`: a topic
    keyed by `source.alias` alone, which another flow could share), for the partitions it has none of its own.
    One is this flow's only where the source group (`group.id`, on this source cluster) holds mirrord's commit
    naming the same topic id: the positions' owner commits there what the transactions committed (§10), and a
    new flow with its own `group.id` has none, so it never resumes where another flow stopped. The earlier
    release's producers are fenced before the positions are read, as for the flow's own (§12)."""
    s = flow.settings
    legacy = Legacy(s.group_id, s.flow, s.source_alias)
    missing = {(t, p) for t, n in topics.items() for p in range(n)} - set(committed)
    if not missing or legacy.positions_topic not in target.partitions():
        return {}
    group = source.committed_with_metadata(s.group_id, topics)
    ours = {tp for tp in missing if tp in group and group[tp][1].startswith(resume.TOPIC_ID)
            and resume.committed_id(group[tp][1]) == ids.get(tp[0])}
    if not ours:
        return {}
    fence_zombies(spark, flow, legacy.transactional_prefix, 0)
    earlier = committed_positions(target, legacy.positions_topic)
    adopted = {tp: earlier[tp] for tp in ours if tp in earlier and earlier[tp][1] == ids.get(tp[0])}
    if adopted:
        log.info("resuming %d partitions from the positions the earlier release committed in %s (group %s's "
                 "commits name the same topics)", len(adopted), legacy.positions_topic, s.group_id)
    return adopted


Position = tuple[int, "str | None"]  # the next offset, the id of the source topic it is an offset of (None: unknown)


def known_topic_ids(spark, ids: dict[str, str]) -> None:
    """The source topics' ids, given to the positions' owner before the first batch is planned: the batch's
    tasks write them with the positions they commit."""
    spark._jvm.io.mirrord.positions.Positions.DRIVER.topicIds(ids)


def committed_positions(target: admin.Cluster, topic: str, timeout: float = READ_TIMEOUT) -> dict[TP, Position]:
    """The source positions the target's committed transactions reach: the newest per partition."""
    consumer = Consumer({**target.settings, "group.id": "mirrord-positions-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    positions: dict[TP, Position] = {}
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while True:
            message = consumer.poll(timeout)
            if message is None:
                raise MirrordError(f"cannot read the committed positions from {topic} on the target within "
                                   f"{timeout:.0f} s")
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return positions
                raise MirrordError(f"cannot read the committed positions from {topic}: {message.error().str()}")
            source, _, partition = message.key().decode().rpartition(":")
            positions[(source, int(partition))] = _position(topic, message.key(), message.value())
    except KafkaException as exc:
        raise MirrordError(f"cannot read the committed positions from {topic}: {exc.args[0].str()}") from None
    finally:
        consumer.close()


def _position(topic: str, key: bytes, value: bytes) -> Position:
    try:
        position = json.loads(value)
        return int(position["offset"]), position.get("topicId")
    except (ValueError, TypeError, KeyError):
        raise MirrordError(f"cannot read the committed position {key.decode(errors='replace')!r} in {topic}: "
                           f"{value[:80]!r} is not {{\"offset\": <next offset>, \"topicId\": <id>}}") from None
