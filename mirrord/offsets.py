"""Offset syncs (source offset ↔ target offset) and their use for consumer-group translation.

Each mirrored batch yields, per partition, the exact target offsets of its first and last records
(from the producer's delivery reports). Translation follows MirrorMaker 2 after KAFKA-12468: take
the newest sync at or below the group's offset; exactly at it → its target offset, above it →
target offset + 1; never extrapolate, so a translated consumer may re-read but never skips.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

MAX_SYNCS_PER_PARTITION = 64


@dataclass(frozen=True, order=True)
class OffsetSync:
    topic: str
    partition: int
    upstream: int
    downstream: int


def translate(syncs: Iterable[OffsetSync], group_offset: int) -> int | None:
    """Target offset for a source group offset, or None when no sync is at or below it."""
    best = None
    for sync in syncs:
        if sync.upstream <= group_offset and (best is None or sync.upstream > best.upstream):
            best = sync
    if best is None:
        return None
    return best.downstream if group_offset == best.upstream else best.downstream + 1


class OffsetSyncStore:
    """Recent syncs per partition, newest last; a rewind upstream (re-mirroring) drops later ones."""

    def __init__(self) -> None:
        self._syncs: dict[tuple[str, int], list[OffsetSync]] = {}

    def add(self, sync: OffsetSync) -> None:
        syncs = self._syncs.setdefault((sync.topic, sync.partition), [])
        while syncs and syncs[-1].upstream >= sync.upstream:
            syncs.pop()
        syncs.append(sync)
        del syncs[:-MAX_SYNCS_PER_PARTITION]

    def syncs(self, topic: str, partition: int) -> list[OffsetSync]:
        return list(self._syncs.get((topic, partition), ()))

    def translate(self, topic: str, partition: int, group_offset: int) -> int | None:
        return translate(self._syncs.get((topic, partition), ()), group_offset)

    def save(self, path: Path) -> None:
        """Written atomically, so a crash leaves the previous complete file."""
        tmp = path.with_suffix(".tmp")
        rows = [asdict(s) for syncs in self._syncs.values() for s in syncs]
        tmp.write_text(json.dumps(rows))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> OffsetSyncStore:
        store = cls()
        if path.exists():
            for row in json.loads(path.read_text()):
                store.add(OffsetSync(**row))
        return store
