"""Retiring the keys of offset-sync writers that are gone, so that the offset-syncs topic stays bounded.

A sync's key names its writer (offsets.py), and compaction keeps every key's newest record: each writer
instance (a producer per start, reload, executor, idle eviction; a stream per query start in exactly-once
mode) would leave one record per partition it copied, for ever, and every start reads them all. The flow's
active host, which reads every sync anyway (checkpoints.GroupTranslation), retires them: for a partition with
keys whose newest record is older than `RETIRE_AFTER`, it first writes what its store holds of the partition
(all that translation knows of it, offsets.OffsetSyncStore) as syncs of its own, one record per target
incarnation, each carrying the held runs in the headers a writer's newest sync carries its earlier runs in;
then a tombstone (the key, no value) for each such key; then it reads the topic to the tombstones, and writes
the partition's syncs again if a retired key wrote a sync meanwhile. A reader then finds what the retired
syncs showed in the retirer's syncs, never a copy less (docs/decisions.md §7).
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from mirrord.mm2.offsets import UNSURE, OffsetSyncStore, encode, writer_of

RETIRE_AFTER = 600.0  # seconds since a key's newest record: a writer that is idle this long may be gone

TP = tuple[str, int]
Record = tuple[bytes, bytes | None, list[tuple[str, bytes]]]  # key, value (None: a tombstone), headers


@dataclass
class KeyState:
    """A key of the offset-syncs topic: its partition, and its newest record's offset and time (ms)."""

    topic: str
    partition: int
    writer: bytes
    offset: int
    timestamp_ms: int


class SyncKeys:
    """The live keys of the offset-syncs topic as read (a tombstone ends one), and the retired keys that wrote
    a sync between the round that retired them and their tombstone (`meanwhile`: their partitions)."""

    def __init__(self) -> None:
        self.live: dict[bytes, KeyState] = {}
        self.retiring: set[bytes] = set()
        self.meanwhile: set[TP] = set()

    def seen(self, msg) -> None:
        key = msg.key()
        if not key:
            return
        try:
            topic, partition, writer = writer_of(key)
        except (struct.error, UnicodeDecodeError):
            return  # not a sync's key: the reader skips the record too
        kind, stamp = msg.timestamp()
        stamp = stamp if kind and stamp > 0 else int(time.time() * 1000)  # none given: as old as its reading
        if msg.value() is None:
            self.live.pop(key, None)
            self.retiring.discard(key)
            return
        if key in self.retiring:
            self.meanwhile.add((topic, partition))
        self.live[key] = KeyState(topic, partition, writer, msg.offset(), stamp)


def retirable(live: Mapping[bytes, KeyState], now_ms: int, own: set[bytes],
              after_ms: float = RETIRE_AFTER * 1000) -> dict[TP, list[bytes]]:
    """By partition, the keys to retire: a writer's (MirrorMaker 2's own key names none), not one of the
    retirer's own, whose newest record is at least `after_ms` old."""
    out: dict[TP, list[bytes]] = {}
    for key, state in live.items():
        if state.writer and state.writer not in own and state.timestamp_ms <= now_ms - after_ms:
            out.setdefault((state.topic, state.partition), []).append(key)
    return {tp: sorted(keys) for tp, keys in sorted(out.items())}


def label_writer(retirer: bytes, label: str | None) -> bytes:
    """The 8 bytes naming the retirer's syncs of one target incarnation (None: syncs that name none)."""
    return hashlib.blake2b(retirer + (b"" if label is None else b"\x01" + label.encode("utf-8")),
                           digest_size=8).digest()


def summary(store: OffsetSyncStore, topic: str, partition: int, retirer: bytes) -> list[Record]:
    """What `store` holds of a partition, as syncs of the retirer's: per target incarnation, its newest held sync
    carrying the others as earlier runs, the runs from before a recreation carried by the first record. The
    newest of all comes last (MirrorMaker 2's reader takes a partition's last sync as its latest). [] when the
    store holds no sync of a known incarnation there."""
    held = store.held(topic, partition)
    unsure = tuple(held.pop(UNSURE, ()))
    records: list[Record] = []
    for label, syncs in sorted(held.items(), key=lambda item: item[1][-1].upstream):
        sync = replace(syncs[-1], earlier=tuple(syncs[:-1]), before=() if records else unsure)
        records.append(encode(sync, label_writer(retirer, label)))
    return records


def tombstones(keys: Iterable[bytes]) -> list[Record]:
    return [(key, None, []) for key in keys]
