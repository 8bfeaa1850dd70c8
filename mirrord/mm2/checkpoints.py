"""Consumer-group offsets translated for the target cluster, for failover: MirrorMaker 2's
MirrorCheckpointConnector.

A group's committed offsets on the source are translated with the offset syncs (offsets.translate:
never past the true position, so a consumer that fails over may re-read, never skip) into
checkpoints, for mirrored topics only. One translation feeds three users:

- the checkpoints topic `<source.alias>.checkpoints.internal` on the target, in MirrorMaker 2's
  record format, so MirrorMaker 2's RemoteClusterUtils.translateOffsets reads it; a checkpoint never
  goes backwards unless the group itself rewound on the source;
- `sync.group.offsets.enabled`: the same offsets committed to the target's group of the same name,
  left alone while it has members, only ever moved forward;
- `mirrord offsets translate` (failover.py), for runbooks.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import Producer

from mirrord.errors import MirrordError
from mirrord.kafka.admin import (
    TP,
    Cluster,
    TopicReader,
    ensure_internal_topic,
    ensure_offset_syncs_topic,
)
from mirrord.mm2 import retirement
from mirrord.mm2.offsets import OffsetSyncsReader, OffsetSyncStore, writer_of
from mirrord.settings.policy import Policy, selects
from mirrord.settings.policy import checkpoints_topic as mm2_checkpoints_topic

log = logging.getLogger(__name__)
VERSION = 0
_ROUNDS = threading.Lock()  # one round at a time: a round closes the group clients it opened


def checkpoints_topic(source_alias: str, separator: str = ".") -> str:
    """MirrorMaker 2's name (DefaultReplicationPolicy.checkpointsTopic)."""
    return mm2_checkpoints_topic(source_alias, separator)


@dataclass(frozen=True)
class Checkpoint:
    """Where `group` stands on the source (`upstream`) and where it resumes on the target (`downstream`),
    for one partition of a target topic."""

    group: str
    topic: str  # the target topic's name, as MirrorMaker 2 writes it
    partition: int
    upstream: int
    downstream: int
    metadata: str = ""

    @property
    def key(self) -> tuple[str, str, int]:
        return self.group, self.topic, self.partition


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def _read_string(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, at)
    end = at + 2 + length
    if length < 0 or end > len(data):
        raise struct.error(f"string of {length} bytes at {at} does not fit in {len(data)}")
    return data[at + 2:end].decode("utf-8"), end


def encode(cp: Checkpoint) -> tuple[bytes, bytes]:
    """MirrorMaker 2's Checkpoint serialization (Kafka protocol types, big-endian): key = group, topic
    (int16 length + UTF-8 each), partition (int32); value = version (int16), upstream offset, downstream
    offset (int64 each), metadata (int16 length + UTF-8)."""
    key = _string(cp.group) + _string(cp.topic) + struct.pack(">i", cp.partition)
    value = struct.pack(">hqq", VERSION, cp.upstream, cp.downstream) + _string(cp.metadata)
    return key, value


def decode(key: bytes, value: bytes) -> Checkpoint:
    group, at = _read_string(key, 0)
    topic, at = _read_string(key, at)
    (partition,) = struct.unpack_from(">i", key, at)
    _version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    metadata, _ = _read_string(value, 18)
    return Checkpoint(group, topic, partition, upstream, downstream, metadata)


@dataclass(frozen=True)
class TargetNow:
    """The target topics as they are now: their ids and their partitions' end offsets, so that translation uses
    no sync of a target topic deleted and recreated since (docs/decisions.md §7). Empty: unknown (tests)."""

    ids: Mapping[str, str] = field(default_factory=dict)  # target topic → id
    ends: Mapping[TP, int] = field(default_factory=dict)  # target (topic, partition) → end offset

    @classmethod
    def ask(cls, target: Cluster, target_topics: Mapping[str, int]) -> TargetNow:
        return cls(target.topic_ids(target_topics),
                   target.end_offsets((t, p) for t, n in target_topics.items() for p in range(n)))

    def stale(self, tp: TP, downstream: int) -> bool:
        """Whether a target offset the target partition cannot hold now (past its end: a recreated topic)."""
        return tp in self.ends and downstream > self.ends[tp]


def group_checkpoints(group: str, committed: Mapping[TP, int], syncs: OffsetSyncStore, policy: Policy,
                      metadata: Mapping[TP, str] | None = None, now: TargetNow = TargetNow()
                      ) -> dict[TP, Checkpoint]:
    """Target (topic, partition) → checkpoint, for the partitions the syncs of the target topics as they are
    `now` can translate; each carries the metadata string the group committed with its offset, as MirrorMaker
    2's do."""
    out = {}
    for (topic, partition), offset in sorted(committed.items()):
        target_tp = (policy.target_topic(topic), partition)
        downstream = syncs.translate(topic, partition, offset, now.ids.get(target_tp[0]), now.ends.get(target_tp))
        if downstream is not None:
            out[target_tp] = Checkpoint(group, target_tp[0], partition, offset, downstream,
                                        (metadata or {}).get((topic, partition), ""))
    return out


def is_newer(new: Checkpoint, old: Checkpoint | None, now: TargetNow = TargetNow()) -> bool:
    """MirrorMaker 2's rule: the first, a rewind of the group on the source, or a step forward on the target;
    and mirrord's: in place of one past the target partition's end (its topic was recreated since)."""
    return (old is None or new.upstream < old.upstream or new.downstream > old.downstream
            or now.stale((old.topic, old.partition), old.downstream))


def translated_offsets(committed: Mapping[TP, int], syncs: OffsetSyncStore, policy: Policy,
                       target_committed: Mapping[TP, int], now: TargetNow = TargetNow()) -> dict[TP, int]:
    """Target (topic, partition) → offset for one group, where translation moves it forward, or where the group's
    offset on the target is past the partition's end (its topic was recreated since)."""
    return {tp: cp.downstream for tp, cp in group_checkpoints("", committed, syncs, policy, now=now).items()
            if cp.downstream > target_committed.get(tp, -1) or now.stale(tp, target_committed.get(tp, -1))}


def wanted_group(group: str, groups: str, exclude: str, own: str) -> bool:
    return group != own and selects(groups, group) and not (exclude and selects(exclude, group))


class CheckpointsReader(TopicReader):
    what = "checkpoint"

    def decode(self, msg) -> Checkpoint:
        return decode(msg.key(), msg.value())


class CheckpointWriter:
    """Writes checkpoints to the target, each only if it is newer than the last one written for its group
    and partition (by any host: the topic is read back to its end before the first write)."""

    def __init__(self, topic: str):
        self.topic = topic
        self._target: Cluster | None = None
        self._producer: Producer | None = None
        self._reader: CheckpointsReader | None = None
        self.last: dict[tuple[str, str, int], Checkpoint] = {}

    def _connect(self, target: Cluster) -> None:
        if target is self._target:
            return
        ensure_internal_topic(target, self.topic, "checkpoints")
        self._target, self.last = target, {}
        self._producer = Producer({**target.settings, "enable.idempotence": True, "acks": "all"})
        if self._reader is not None:
            self._reader.close()
        self._reader = CheckpointsReader(target, self.topic)

    def write(self, target: Cluster, checkpoints: list[Checkpoint], now: TargetNow = TargetNow()) -> int:
        """Writes the newer ones (`now`: the target topics as they are); returns how many were written."""
        self._connect(target)
        self._reader.read_to_end(lambda cp: self.last.__setitem__(cp.key, cp))
        newer = [cp for cp in checkpoints if is_newer(cp, self.last.get(cp.key), now)]
        errors: list[str] = []
        for cp in newer:
            key, value = encode(cp)
            self._producer.produce(self.topic, key=key, value=value, partition=0,
                                   on_delivery=lambda err, _msg: err and errors.append(err.str()))
        if self._producer.flush(30) or errors:
            raise MirrordError(f"cannot write checkpoints to {self.topic}: {errors[0] if errors else 'timed out'}")
        self.last.update((cp.key, cp) for cp in newer)
        return len(newer)


def source_groups(source: Cluster, groups: str, exclude: str, own: str) -> list[str]:
    return [g for g in source.consumer_groups() if wanted_group(g, groups, exclude, own)]


def emit_checkpoints(source: Cluster, target: Cluster, writer: CheckpointWriter, topics: Mapping[str, int],
                     syncs: OffsetSyncStore, syncs_lock: threading.Lock, policy: Policy, groups: str,
                     exclude: str, own: str) -> int:
    """One round over the source's groups (emit.checkpoints.interval.seconds); returns 0 (a failure raises)."""
    found: list[Checkpoint] = []
    now = TargetNow.ask(target, {policy.target_topic(t): n for t, n in topics.items()})
    with _ROUNDS:
        _translate_groups(source, topics, syncs, syncs_lock, policy, groups, exclude, own, found, now)
    written = writer.write(target, found, now)
    if written:
        log.info("%d checkpoints written to %s", written, writer.topic)
    return 0


def _translate_groups(source: Cluster, topics: Mapping[str, int], syncs: OffsetSyncStore,
                      syncs_lock: threading.Lock, policy: Policy, groups: str, exclude: str, own: str,
                      found: list[Checkpoint], now: TargetNow) -> None:
    try:
        for group in source_groups(source, groups, exclude, own):
            entries = source.committed_with_metadata(group, topics)
            committed = {tp: offset for tp, (offset, _) in entries.items()}
            with syncs_lock:
                found.extend(group_checkpoints(group, committed, syncs, policy,
                                               {tp: meta for tp, (_, meta) in entries.items()}, now).values())
    finally:
        source.forget_groups(keep=own)


def sync_group_offsets(source: Cluster, target: Cluster, topics: Mapping[str, int], syncs: OffsetSyncStore,
                       syncs_lock: threading.Lock, policy: Policy, groups: str, exclude: str, own: str) -> int:
    """One round over the source's groups; returns how many target groups were moved."""
    moved = 0
    target_topics = {policy.target_topic(t): n for t, n in topics.items()}
    now = TargetNow.ask(target, target_topics)
    with _ROUNDS:
        try:
            for group in source_groups(source, groups, exclude, own):
                committed = source.committed(group, topics)
                if not committed:
                    continue
                if target.group_has_members(group):
                    log.debug("group %s has members on the target: its offsets are theirs", group)
                    continue
                with syncs_lock:
                    changes = translated_offsets(committed, syncs, policy, target.committed(group, target_topics),
                                                 now)
                if changes:
                    target.commit(group, changes)
                    moved += 1
                    log.info("group %s: translated offsets committed on the target for %d partitions",
                             group, len(changes))
        finally:
            source.forget_groups(keep=own)
            target.forget_groups()
    return moved


class GroupTranslation:
    """The flow's offset syncs, read back from the target before each round (so a standby or a host
    whose state was lost translates as well as the host that wrote them), the two periodic jobs
    they feed: checkpoints and the target groups' offsets, and the retirement of gone writers' keys."""

    def __init__(self, source: Cluster, target: Cluster, syncs_topic: str, checkpoints_topic: str):
        self.source, self.target = source, target
        self.syncs = OffsetSyncStore()
        self._syncs_topic = syncs_topic
        self._lock = threading.Lock()
        self._reader: OffsetSyncsReader | None = None
        self._writer = CheckpointWriter(checkpoints_topic)
        self._keys = retirement.SyncKeys()
        self._retirer = os.urandom(8)  # names this process's syncs of what it retires
        self._own: set[bytes] = set()
        self._producer: Producer | None = None

    def prepare(self) -> None:
        """The offset-syncs topic on the target, before the query's interceptors write to it."""
        ensure_offset_syncs_topic(self.target, self._syncs_topic)
        if self._reader is None:
            self._reader = OffsetSyncsReader(self.target, self._syncs_topic, self._keys.seen)

    @property
    def ready(self) -> bool:
        return self._reader is not None

    def _read(self) -> None:
        with self._lock:
            self._reader.read_to_end(self.syncs.add)

    def emit_checkpoints(self, topics: Mapping[str, int], policy: Policy, groups: str, exclude: str,
                         own: str) -> int:
        self._read()
        return emit_checkpoints(self.source, self.target, self._writer, topics, self.syncs, self._lock, policy,
                                groups, exclude, own)

    def sync_group_offsets(self, topics: Mapping[str, int], policy: Policy, groups: str, exclude: str,
                           own: str) -> int:
        """Translated offsets committed into idle target groups; failures raise, moved groups are not errors."""
        self._read()
        sync_group_offsets(self.source, self.target, topics, self.syncs, self._lock, policy, groups, exclude, own)
        return 0

    def retire(self) -> int:
        """Retires the keys of writers idle for `retirement.RETIRE_AFTER` (retirement.py): their partitions'
        syncs as the store holds them, written as this process's, then their tombstones; then the syncs again of
        a partition whose retired key wrote before its tombstone. Returns 0 (a failure raises; the next round
        takes up what is left)."""
        self._read()
        with self._lock:
            plan = retirement.retirable(self._keys.live, int(time.time() * 1000), self._own)
            written = self._summaries(plan)
            plan = {tp: keys for tp, keys in plan.items() if tp in written}
            self._keys.retiring.update(key for keys in plan.values() for key in keys)
        if plan:
            self._send([record for records in written.values() for record in records])
            self._send(retirement.tombstones(key for keys in plan.values() for key in keys))
            self._read()  # to the tombstones: a retired key's sync written meanwhile is in the store now
            log.info("retired %d offset-sync keys of %d partitions in %s (their syncs now this host's)",
                     sum(map(len, plan.values())), len(plan), self._syncs_topic)
        with self._lock:
            meanwhile = set(self._keys.meanwhile)
            again = self._summaries(sorted(meanwhile))
        self._send([record for records in again.values() for record in records])
        with self._lock:
            self._keys.meanwhile -= meanwhile
        return 0

    def _summaries(self, partitions: Iterable[TP]) -> dict[TP, list[retirement.Record]]:
        out = {}
        for topic, partition in partitions:
            records = retirement.summary(self.syncs, topic, partition, self._retirer)
            if records:
                self._own.update(writer_of(key)[2] for key, _, _ in records)
                out[(topic, partition)] = records
        return out

    def _send(self, records: list[retirement.Record]) -> None:
        if not records:
            return
        if self._producer is None:
            self._producer = Producer({**self.target.settings, "enable.idempotence": True, "acks": "all"})
        errors: list[str] = []
        for key, value, headers in records:
            self._producer.produce(self._syncs_topic, key=key, value=value, headers=headers, partition=0,
                                   on_delivery=lambda err, _msg: err and errors.append(err.str()))
        if self._producer.flush(30) or errors:
            raise MirrordError(f"cannot write to {self._syncs_topic}: {errors[0] if errors else 'timed out'}")
