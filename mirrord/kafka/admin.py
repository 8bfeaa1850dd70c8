"""Cluster administration with confluent-kafka's AdminClient: topics, partitions, group offsets, end offsets."""

from __future__ import annotations

import base64
import logging
import struct
import time
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from mirrord.errors import ClusterUnavailable, MirrordError
from mirrord.kafka.kafkalog import with_logger
from mirrord.settings.policy import Policy, selects, topic_configs_to_copy

log = logging.getLogger(__name__)
TIMEOUT = 15.0
OUTAGE_TIMEOUT = 120.0  # as long as the producer retries a record (delivery.timeout.ms)

TP = tuple[str, int]


class Member(NamedTuple):
    """A consumer group's member: its client id, its host, whether it holds partitions."""
    client_id: str
    host: str
    assigned: bool

CONFIG_REFUSED = {KafkaError.INVALID_CONFIG, KafkaError.POLICY_VIOLATION}
# Kafka's retriable errors that librdkafka does not flag retriable in an admin future's error: the leader-epoch
# ones come from a partition whose leadership is still spreading (a topic just created, a broker just back)
RETRIABLE = {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
             KafkaError.NOT_COORDINATOR, KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT,
             KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError._TRANSPORT,
             KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH, KafkaError.OFFSET_NOT_AVAILABLE}


def retrying(call, timeout: float = 30.0):
    """Retry a broker call on errors the broker itself says are temporary (coordinator loading, ...)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except KafkaException as exc:
            err = exc.args[0]
            temporary = err.retriable() or err.code() in RETRIABLE
            if not temporary or time.monotonic() > deadline:
                raise
            time.sleep(0.25)


class Cluster:
    """One cluster, named for messages ("source", "target"); never logs its settings (secrets)."""

    def __init__(self, name: str, settings: Mapping[str, str]):
        self.name = name
        self.bootstrap = settings.get("bootstrap.servers", "")
        self.settings = with_logger(dict(settings))
        self.admin = AdminClient(self.settings)
        self._groups: dict[str, Consumer] = {}
        self.java_members: Callable[[str, float], list[Member]] | None = None

    def check(self, timeout: float = TIMEOUT) -> None:
        self.admin.poll(0)  # its log lines (mirrord.kafka), which wait for a poll
        try:
            md = self.admin.list_topics(timeout=timeout)
        except KafkaException as exc:
            raise ClusterUnavailable(f"{self.name} cluster ({self.bootstrap}) did not answer: {exc}") from None
        if not md.brokers:
            raise ClusterUnavailable(f"{self.name} cluster ({self.bootstrap}) has no brokers")

    def cluster_id(self) -> str:
        """The cluster's id (Kafka's `clusterId`, base64url), chosen when the cluster was made."""
        return retrying(lambda: self.admin.describe_cluster(request_timeout=TIMEOUT).result().cluster_id)

    def partitions(self, pattern: str | None = None, patience: float = OUTAGE_TIMEOUT,
                   timeout: float = TIMEOUT) -> dict[str, int]:
        """Topic → partition count, for topics matching `pattern` (all when None); an unreachable cluster is
        asked again for `patience` seconds, each time waiting `timeout` for its answer."""
        md = retrying(lambda: self.admin.list_topics(timeout=timeout), timeout=patience)
        return {
            name: len(t.partitions)
            for name, t in md.topics.items()
            if t.error is None and (pattern is None or selects(pattern, name))
        }

    def end_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self._list_offsets(tps, OffsetSpec.latest())

    def log_start_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
        """The first offset each partition still holds (retention and delete-records move it up)."""
        return self._list_offsets(tps, OffsetSpec.earliest())

    def _list_offsets(self, tps: Iterable[TP], spec: OffsetSpec) -> dict[TP, int]:
        tps = list(tps)
        if not tps:
            return {}
        def call():
            request = {TopicPartition(t, p): spec for t, p in tps}
            futures = self.admin.list_offsets(request, request_timeout=TIMEOUT)
            return {(tp.topic, tp.partition): fut.result().offset for tp, fut in futures.items()}
        return retrying(call)

    def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """Each topic's configs set on the topic itself (not broker defaults), secrets left out."""
        return {name: {k: e.value for k, e in entries.items()
                       if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and not e.is_sensitive
                       and e.value is not None}
                for name, entries in self._described(topics).items()}

    def raised_max_message_bytes(self, topics: Iterable[str]) -> dict[str, int]:
        """Each topic's `max.message.bytes` where it was raised or lowered from Kafka's default (on the topic, or on
        the brokers' message.max.bytes)."""
        return {name: int(entry.value) for name, entries in self._described(topics).items()
                if (entry := entries.get("max.message.bytes")) is not None and entry.value is not None
                and entry.source != ConfigSource.DEFAULT_CONFIG.value}

    def _described(self, topics: Iterable[str]) -> dict[str, dict]:
        """Each topic's config entries, by name, as DescribeConfigs gives them."""
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
        if not resources:
            return {}
        def call():
            futures = self.admin.describe_configs(resources, request_timeout=TIMEOUT)
            return {res.name: fut.result() for res, fut in futures.items()}
        return retrying(call)

    def set_topic_configs(self, topic: str, configs: Mapping[str, str], delete: Iterable[str] = ()) -> None:
        """Set these configs on the topic and delete those (back to the broker's default); incremental: its
        other configs stay as they are."""
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in sorted(delete)]
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
        try:
            retrying(lambda: self.admin.incremental_alter_configs([resource], request_timeout=TIMEOUT)[resource]
                     .result())
        except KafkaException as exc:
            raise MirrordError(f"cannot set configs of {self.name} topic {topic}: {exc.args[0].str()}") from None

    def consumer_groups(self) -> list[str]:
        """Every consumer group of the cluster."""
        result = retrying(lambda: self.admin.list_consumer_groups(request_timeout=TIMEOUT).result())
        return sorted(g.group_id for g in result.valid)

    def group_has_members(self, group: str) -> bool:
        """Whether consumers are in the group now (a group that does not exist has none)."""
        return bool(self.group_members(group))

    def group_members(self, group: str) -> list[str]:
        """The group's members now, as client-id@host."""
        return [f"{m.client_id}@{m.host}" for m in retrying(lambda: self.members(group, TIMEOUT))]

    def assigned_clients(self, group: str) -> list[str]:
        """The client ids of the group's members that hold a partition now (one quick question: the caller
        asks again later)."""
        return [m.client_id for m in self.members(group, 5) if m.assigned]

    def members(self, group: str, timeout: float) -> list[Member]:
        """The group's members now. A daemon asks through Kafka's Java client (`java_members`, set once its JVM
        runs): librdkafka's DescribeConsumerGroups aborts the process when its request cannot be sent on a
        connection that drops (librdkafka issue 4605), as on a host cut off from its target."""
        if self.java_members is not None:
            return self.java_members(group, timeout)
        desc = self.admin.describe_consumer_groups([group], request_timeout=timeout)[group].result(timeout=2 * timeout)
        return [Member(m.client_id, m.host, bool(m.assignment and m.assignment.topic_partitions))
                for m in desc.members]

    def forget_groups(self, keep: str = "") -> None:
        """Close the clients opened for other groups' offsets."""
        for group in [g for g in self._groups if g != keep]:
            self._groups.pop(group).close()

    def _group_client(self, group: str):
        """A consumer that never subscribes, used only to read and commit the group's offsets.

        Not the AdminClient: its ListConsumerGroupOffsets crashes the process when the group
        coordinator is still loading (librdkafka issue 5040); the consumer's path handles it.
        """
        client = self._groups.get(group)
        if client is None:
            client = self._groups[group] = Consumer(
                {**self.settings, "group.id": group, "enable.auto.commit": False, "enable.partition.eof": False})
        return client

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        """Each existing topic's id, spelled as Kafka's Java Uuid.toString() spells it (base64url)."""
        names = list(topics)
        return retrying(lambda: _ids(self.admin.describe_topics(TopicCollection(names), request_timeout=TIMEOUT))
                        ) if names else {}

    def committed(self, group: str, topics: Mapping[str, int]) -> dict[TP, int]:
        """The group's committed offsets for these topics' partitions (absent where none)."""
        return {tp: offset for tp, (offset, _) in self.committed_with_metadata(group, topics).items()}

    def committed_with_metadata(self, group: str, topics: Mapping[str, int]) -> dict[TP, tuple[int, str]]:
        """The group's committed offsets and their metadata strings ('' for none), where committed."""
        tps = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
        client = self._group_client(group)
        client.poll(0)  # serves its log lines; it never subscribes, so nothing is consumed
        result = retrying(lambda: client.committed(tps, timeout=TIMEOUT))
        return {(tp.topic, tp.partition): (tp.offset, tp.metadata or "") for tp in result if tp.offset >= 0}

    def commit(self, group: str, offsets: Mapping[TP, int]) -> None:
        """Commit next-offsets under `group`; the broker refuses while the group has live members."""
        if not offsets:
            return
        tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        client = self._group_client(group)
        client.poll(0)  # serves its log lines
        result = retrying(lambda: client.commit(offsets=tps, asynchronous=False))
        failed = [tp for tp in result or () if tp.error is not None]
        if failed:
            raise MirrordError(f"committing group {group!r} on {self.name}: {failed[0].error}")

    def close(self) -> None:
        for client in self._groups.values():
            client.close()
        self._groups.clear()


def _ids(described: Mapping) -> dict[str, str]:
    """Topic ids from describe_topics' futures; a topic deleted meanwhile has none."""
    ids = {}
    for name, future in described.items():
        try:
            ids[name] = java_uuid(future.result().topic_id)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
    return ids


def java_uuid(uuid) -> str:
    """A confluent-kafka Uuid as Kafka's Java client prints it: 16 big-endian bytes, base64url, no padding."""
    raw = (uuid.get_most_significant_bits().to_bytes(8, "big", signed=True)
           + uuid.get_least_significant_bits().to_bytes(8, "big", signed=True))
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def ensure_topics(source_partitions: Mapping[str, int], target: Cluster, policy: Policy,
                  source: Cluster | None = None, on_refused: Callable[[str], None] = lambda _topic: None) -> list[str]:
    """Create target topics (same partition count; with `source`, its topics' own configs) or add
    partitions, before anything is written. A topic whose configs the target refuses is created with the
    target's defaults and handed to `on_refused` (a metric)."""
    existing = target.partitions()
    missing = [t for t in source_partitions if policy.target_topic(t) not in existing]
    configs = source.topic_configs(missing) if source is not None else {}
    created: list[str] = []
    new_topics, grow, copied, counts = [], [], {}, {}
    for topic, count in source_partitions.items():
        name = policy.target_topic(topic)
        have = existing.get(name)
        if have is None:
            copied[name], counts[name] = topic_configs_to_copy(configs.get(topic, {})), count
            new_topics.append(NewTopic(name, num_partitions=count, replication_factor=-1, config=copied[name]))
        elif have < count:
            grow.append(NewPartitions(name, count))
    futures = {}
    if new_topics:
        created_futures = target.admin.create_topics(new_topics, request_timeout=TIMEOUT)
        futures.update({n: ("create", f) for n, f in created_futures.items()})
    if grow:
        grown_futures = target.admin.create_partitions(grow, request_timeout=TIMEOUT)
        futures.update({n: ("grow", f) for n, f in grown_futures.items()})
    for name, (what, fut) in futures.items():
        try:
            fut.result()
            created.append(name)
            settings = ", ".join(f"{k}={v}" for k, v in sorted(copied.get(name, {}).items()))
            log.info("target topic %s: %s", name,
                     "partitions added" if what == "grow" else f"created ({settings or 'broker defaults'})")
        except KafkaException as exc:
            err = exc.args[0]
            if what == "create" and copied.get(name) and err.code() in CONFIG_REFUSED:
                log.warning("target topic %s: the target refused the source topic's configs (%s); creating it "
                            "with the target's defaults", name, err.str())
                _create_plain(target, name, counts[name])
                on_refused(name)
                created.append(name)
            elif err.code() not in (KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.INVALID_PARTITIONS):
                raise MirrordError(f"cannot {what} target topic {name}: {err.str()}") from None
    if created:
        _wait_visible(target, {policy.target_topic(t): n for t, n in source_partitions.items()})
    return created


def _create_plain(target: Cluster, name: str, partitions: int) -> None:
    future = target.admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=-1)],
                                        request_timeout=TIMEOUT)[name]
    try:
        future.result()
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise MirrordError(f"cannot create target topic {name}: {exc.args[0].str()}") from None


def _wait_visible(target: Cluster, wanted: Mapping[str, int], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        have = target.partitions()
        if all(have.get(t, 0) >= n for t, n in wanted.items()):
            return
        time.sleep(0.1)
    raise MirrordError(f"target topics not visible after {timeout:.0f}s: {sorted(wanted)}")


SYNCS_SEGMENT_MS = 3_600_000  # the offset-syncs topic's segments roll hourly, so compaction reaches them


def ensure_offset_syncs_topic(target: Cluster, name: str) -> None:
    """The offset-syncs topic on the target: one partition, compacted, as MirrorMaker 2 creates it, and its
    segments rolled every hour (`segment.ms`): compaction never touches the active segment, which the broker's
    default rolls after 7 days or 1 GiB, so without it every start read a week of syncs (docs/decisions.md §7)."""
    ensure_internal_topic(target, name, "offset syncs", {"segment.ms": str(SYNCS_SEGMENT_MS)})


def ensure_internal_topic(target: Cluster, name: str, what: str, config: dict[str, str] | None = None) -> None:
    """One of MirrorMaker 2's topics (offset syncs, checkpoints, heartbeats) or mirrord's leader election
    topic: one partition, compacted (and `config`, when made here)."""
    if name in target.partitions():
        return
    new = NewTopic(name, num_partitions=1, replication_factor=-1,
                   config={"cleanup.policy": "compact", **(config or {})})
    try:
        target.admin.create_topics([new], request_timeout=TIMEOUT)[name].result()
        log.info("%s topic %s created on the %s cluster", what, name, target.name)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise MirrordError(f"cannot create the {what} topic {name} on the {target.name} cluster: "
                               f"{exc.args[0].str()}") from None
    _wait_visible(target, {name: 1})


class TopicReader:
    """Reads a one-partition internal topic (offset syncs, checkpoints, heartbeats) from its start and
    keeps up with it, one call at a time: a group is translated only from syncs read to the end of the
    topic (MirrorMaker 2's rule), so a standby or a host whose state was lost translates as well as the
    host that wrote them."""

    what = "record"

    def __init__(self, cluster: Cluster, topic: str):
        self.topic = topic
        self.cluster = cluster
        self._consumer: Consumer | None = None
        self.position = 0

    def decode(self, msg):
        """The record for `add`; None: nothing to hand on (a tombstone)."""
        return msg

    def read_to_end(self, add: Callable[[object], None], timeout: float = TIMEOUT) -> int:
        """Hand every record written since the last call, decoded, to `add`; returns how many were read. Fails
        only once `timeout` passed with no record read: a long topic (hundreds of thousands of offset syncs, read
        from offset 0 at a start) takes as long as it takes."""
        if self._consumer is None:
            # read_committed: in exactly-once mode the offset syncs are written in transactions, and an aborted
            # one's syncs name copies that were aborted (docs/decisions.md §12); its markers end the log
            self._consumer = Consumer({**self.cluster.settings, "group.id": "mirrord-internal-topics-reader",
                                       "enable.auto.commit": False, "enable.partition.eof": True,
                                       "isolation.level": "read_committed"})
            self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        _, end = retrying(lambda: self._consumer.get_watermark_offsets(TopicPartition(self.topic, 0),
                                                                       timeout=timeout))
        read = 0
        deadline = time.monotonic() + timeout
        while self.position < end:
            if time.monotonic() > deadline:
                raise MirrordError(f"reading {self.topic} on the {self.cluster.name} cluster: at offset "
                                   f"{self.position} of {end}, nothing read for {timeout:.0f}s")
            batch = self._consumer.consume(10_000, timeout=1.0)
            if any(not msg.error() for msg in batch):
                deadline = time.monotonic() + timeout
            for msg in batch:
                if msg.error() and msg.error().code() == KafkaError._PARTITION_EOF:
                    self.position = max(self.position, msg.offset())  # past transaction markers: no record there
                    continue
                if msg.error():
                    raise MirrordError(f"reading {self.topic}: {msg.error().str()}")
                self.position = msg.offset() + 1
                try:
                    record = self.decode(msg)
                except (struct.error, UnicodeDecodeError, TypeError) as exc:
                    log.warning("%s offset %d: not a %s, skipped: %s", self.topic, msg.offset(), self.what, exc)
                    continue
                if record is not None:
                    add(record)
                    read += 1
        return read

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
