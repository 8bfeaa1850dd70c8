"""Exactly once (`delivery = exactly-once`, docs/decisions.md §12): what the query needs besides its sink.

mirrord's transactional writer (jvm/, `io.mirrord.sink.TransactionalWriter`) writes each stream's records
in Kafka transactions on the target, under the transactional id `<prefix>-<stream>`, with the source
positions they reach in the flow's positions topic and the offset syncs that pair them. Before a query
starts, this module fences every earlier producer of the flow's ids (the broker aborts their open
transactions and refuses their commits for ever), and only then reads the positions the target holds,
`read_committed`: the start resumes from them, whatever Spark's checkpoint or the source group says.
A position is `{"offset": <next offset>, "topicId": "<the source topic's id>"}` (the id when the writer knew it).
"""

from __future__ import annotations

import json
import logging

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from mirrord.errors import MirrordError
from mirrord.kafka import admin
from mirrord.kafka.admin import TP
from mirrord.settings.config import Settings
from mirrord.settings.flow import Flow

log = logging.getLogger(__name__)
FENCE_TIMEOUT_MS = 60_000
READ_TIMEOUT = 60.0
# The producer's blocking calls (initTransactions, a commit) wait at most this long for a target away; Spark's
# sink default (forever) would hold a task through an outage the supervisor already handles.
MAX_BLOCK_MS = 60_000
NOT_FOR_THE_WRITER = ("interceptor.classes",)


def positions_topic(settings: Settings) -> str:
    """The flow's committed source positions on the target, as MirrorMaker 2's `mm2-offsets.<alias>.internal`."""
    return f"mirrord-positions.{settings.source_alias}.internal"


def transactional_prefix(settings: Settings) -> str:
    """The flow's transactional ids are `<prefix>-<stream>`: the hosts of one flow share them (a standby that
    takes over fences the active host's producers), two flows never do."""
    return f"mirrord-{settings.flow}-{settings.source_alias}"


def producer_config(flow: Flow) -> dict[str, str]:
    """The target's producer properties for the transactional producers: the sink's, without mirrord's
    interceptor (the writer does its work), max.block.ms bounded."""
    config = flow.target_properties
    others = [c for c in config.pop("interceptor.classes", "").split(",") if c and not c.startswith("io.mirrord.")]
    if others:
        config["interceptor.classes"] = ",".join(others)
    config["max.block.ms"] = str(min(int(config.get("max.block.ms", MAX_BLOCK_MS)), MAX_BLOCK_MS))
    return config


def java_writer(spark, flow: Flow, streams: int):
    """The query's sink: an io.mirrord.sink.TransactionalWriter for `streams` streams."""
    s = flow.settings
    return spark._jvm.io.mirrord.sink.TransactionalWriter(
        producer_config(flow), transactional_prefix(s), streams, positions_topic(s), flow.offset_syncs_topic,
        s.offset_lag_max, s.transaction_interval_ms, flow.policy.target_prefix)


def fence_zombies(spark, flow: Flow, streams: int) -> list[str]:
    """Every producer that wrote this flow's streams before, fenced by the target's brokers (their open
    transactions aborted); the transactional ids fenced. The JVM's own idle producers go first."""
    spark._jvm.io.mirrord.sink.TransactionalWriter.closeAll()
    try:
        ids = list(spark._jvm.io.mirrord.sink.Zombies.fence(producer_config(flow), transactional_prefix(flow.settings),
                                                           streams, FENCE_TIMEOUT_MS))
    except Exception as exc:  # noqa: BLE001 - py4j wraps Kafka's errors
        reason = str(getattr(exc, "java_exception", exc)).splitlines()[0]
        raise MirrordError(f"cannot fence the earlier producers of flow {flow.name} on the target: {reason}") from None
    log.info("fenced the earlier producers of this flow on the target: %s", ", ".join(ids))
    return ids


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
