"""Offset syncs (source offset ↔ target offset) and their use for consumer-group translation.

mirrord's producer interceptor (jvm/, `OffsetSyncWriter`) pairs each record's source offset with
the target offset the target acknowledged and writes syncs into a compacted topic on the target,
in MirrorMaker 2's record format, by MirrorMaker 2's rules (a sync at every discontinuity, and at
least every `offset.lag.max` records) plus one header: `mirrord.run.start`, the source offset from
which, up to this sync, source and target offsets advanced together one for one. Its key is MirrorMaker
2's followed by the writer's id, so that compaction keeps every writer's newest sync, and a sync carries
its writer's earlier runs of the partition (`mirrord.writer.runs`): that newest sync alone shows every copy
its writer made.

Each sync of mirrord's names the target topic's incarnation its target offsets belong to (the topic's id,
header `mirrord.target.topic.id`), and carries its writer's runs from before it heard of the topic's last
recreation (`mirrord.writer.runs.before`). Translation rests on the syncs of the target topic as it is now and
those that name none (MirrorMaker 2's, mirrord's before the header); the others (another incarnation's, or of
this one but written before their writer knew it) may only lower an answer; and no sync at or past the
partition's end counts (docs/decisions.md §7).

Translation: where a sync's run covers the group's offset, it is exact; elsewhere MirrorMaker 2's
rule after KAFKA-12468 applies (the newest sync at or below the group's offset: exactly at it → its
target offset, above it → target offset + 1; never extrapolate), so a translated consumer may
re-read but never skips a copy the syncs show, and compaction cannot hide one (docs/decisions.md §7).
"""

from __future__ import annotations

import bisect
import json
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from mirrord.kafka.admin import TopicReader

MAX_SYNCS_PER_PARTITION = 64
RUN_START_HEADER = "mirrord.run.start"
EARLIER_RUNS_HEADER = "mirrord.writer.runs"
TARGET_TOPIC_ID_HEADER = "mirrord.target.topic.id"
RUNS_BEFORE_HEADER = "mirrord.writer.runs.before"
UNSURE = ""  # a target incarnation not known (runs from before a recreation, a sync written before its writer
# knew the topic's id: the topic may have been recreated since it was copied into): lowering only


@dataclass(frozen=True, order=True)
class OffsetSync:
    topic: str
    partition: int
    upstream: int
    downstream: int
    run_start: int | None = None  # None: only this one record is known to map (a MirrorMaker 2 sync)
    earlier: tuple[OffsetSync, ...] = field(default=(), compare=False, repr=False)  # its writer's earlier runs
    target_id: str | None = field(default=None, compare=False)  # the target topic's incarnation (None: unknown)
    before: tuple[OffsetSync, ...] = field(default=(), compare=False, repr=False)  # runs of before a recreation

    @property
    def first(self) -> int:
        """The first source offset of the run this sync ends."""
        return self.upstream if self.run_start is None else min(self.run_start, self.upstream)


def decode(key: bytes, value: bytes, headers: Sequence[tuple[str, bytes | None]] | None = None) -> OffsetSync:
    """A record of the offset-syncs topic, in MirrorMaker 2's format: key = topic (int16 length + UTF-8)
    and partition (int32), then mirrord's writer id (ignored here); value = upstream and downstream offsets
    (int64 each), big-endian. mirrord's headers: the run start (int64), the writer's earlier runs (int64
    triples: upstream, downstream, run start), the target topic's id (UTF-8; empty: not known to the writer)."""
    (length,) = struct.unpack_from(">h", key, 0)
    topic = key[2:2 + length].decode("utf-8")
    (partition,) = struct.unpack_from(">i", key, 2 + length)
    upstream, downstream = struct.unpack_from(">qq", value, 0)
    run_start, runs, target_id = None, {EARLIER_RUNS_HEADER: (), RUNS_BEFORE_HEADER: ()}, None
    for name, raw in headers or ():
        if name == RUN_START_HEADER and raw is not None and len(raw) == 8:
            (run_start,) = struct.unpack(">q", raw)
        elif name in runs and raw is not None and len(raw) % 24 == 0:
            values = struct.unpack(f">{len(raw) // 8}q", raw)
            runs[name] = tuple(OffsetSync(topic, partition, *values[i:i + 3]) for i in range(0, len(values), 3))
        elif name == TARGET_TOPIC_ID_HEADER and raw is not None:
            target_id = raw.decode("utf-8", "replace")  # empty: its writer did not know the id yet (UNSURE)
    return OffsetSync(topic, partition, upstream, downstream, run_start, runs[EARLIER_RUNS_HEADER], target_id,
                      runs[RUNS_BEFORE_HEADER])


def encode(sync: OffsetSync, writer: bytes) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """The record `decode` reads back as `sync`: MirrorMaker 2's key followed by `writer` (8 bytes), its value,
    and mirrord's headers (a run start; earlier runs and runs from before as int64 triples; the target id)."""
    name = sync.topic.encode("utf-8")
    key = struct.pack(">h", len(name)) + name + struct.pack(">i", sync.partition) + writer
    headers = [(RUN_START_HEADER, struct.pack(">q", sync.first))]
    for header, runs in ((EARLIER_RUNS_HEADER, sync.earlier), (RUNS_BEFORE_HEADER, sync.before)):
        if runs:
            headers.append((header, b"".join(struct.pack(">qqq", r.upstream, r.downstream, r.first) for r in runs)))
    if sync.target_id is not None:
        headers.append((TARGET_TOPIC_ID_HEADER, sync.target_id.encode("utf-8")))
    return key, struct.pack(">qq", sync.upstream, sync.downstream), headers


def writer_of(key: bytes) -> tuple[str, int, bytes]:
    """A sync's source topic and partition, and the bytes after MirrorMaker 2's key that name its writer
    (b"": MirrorMaker 2's own key)."""
    (length,) = struct.unpack_from(">h", key, 0)
    (partition,) = struct.unpack_from(">i", key, 2 + length)
    return key[2:2 + length].decode("utf-8"), partition, key[6 + length:]


def translate(syncs: Iterable[OffsetSync], group_offset: int, lowering: Iterable[OffsetSync] = ()) -> int | None:
    """Target offset for a source group offset, or None when no sync's run begins at or below it.

    Never ahead of any copy the syncs show (docs/decisions.md §7): every record at or after the group's
    offset that a sync shows copied has a copy at or after the answer. So the answer is the lowest of: the
    position of the group's offset in every run that covers it, and the first position of every run entirely
    above it (several writers, a replay, a late writer's records, a recreated target topic: each run is a
    copy, and the group must not pass any of them); where no run covers the group's offset, MirrorMaker 2's
    rule (KAFKA-12468) for the newest sync below it, its target offset + 1, never extrapolated. With one
    writer copying one for one (a contiguous run), the lowest is its own position: exact.

    `lowering`: syncs that may describe the target topic or may not (they name an earlier incarnation of it:
    of the old topic, or of the new one written before their writer knew it was recreated, or of one their writer
    did not know yet). Each may only lower the answer, as a run covering or above the group's offset does; one
    beginning at or below the group's offset shows that the group was mirrored, so a run of the topic as it is
    above the group's offset answers (the group's next records went with a deleted topic), but no lowering sync
    answers alone, nor gives MirrorMaker 2's + 1.
    """
    lowest: int | None = None  # of the candidates
    below: OffsetSync | None = None  # the newest sync below the group's offset
    begun = covered = False
    for s in syncs:
        first = s.first
        if first <= group_offset:
            begun = True
        if s.upstream >= group_offset:
            candidate = s.downstream - (s.upstream - max(group_offset, first))
            lowest = candidate if lowest is None else min(lowest, candidate)
            covered = covered or first <= group_offset
        elif below is None or s.upstream > below.upstream:
            below = s
    lowering = list(lowering)
    if not begun and not any(s.first <= group_offset for s in lowering):
        return None
    if not covered and below is not None:
        plus_one = below.downstream + 1  # MirrorMaker 2's rule: past the newest sync below, never extrapolated
        lowest = plus_one if lowest is None else min(lowest, plus_one)
    if lowest is None:
        return None  # only syncs of another incarnation, or an unknown one, would answer
    for s in lowering:
        if s.upstream >= group_offset:
            lowest = min(lowest, s.downstream - (s.upstream - max(group_offset, s.first)))
    return lowest


def _run(sync: OffsetSync) -> tuple[int, int]:
    """A run's identity: its first source offset and where that record is in the target. Two syncs of one
    run agree on every offset both show, and the one further along shows more."""
    return sync.first, sync.downstream - (sync.upstream - sync.first)


def _merged(lower: OffsetSync, upper: OffsetSync) -> OffsetSync:
    """One sync in place of two neighbours (by source offset), never giving a higher answer than they did:
    at the upper one's source offset, the lowest first position of the two runs, as a run of one record.
    Every group at or below its source offset gets an answer at or below both runs' first positions, which
    is at or below what either run gave; a group it no longer covers gets MirrorMaker 2's + 1 or none."""
    lowest = min(_run(lower)[1], _run(upper)[1])
    return OffsetSync(upper.topic, upper.partition, upper.upstream, lowest, upper.upstream,
                      target_id=upper.target_id)  # both of one target incarnation: the store keeps them apart


def _least_needed(syncs: list[OffsetSync]) -> int:
    """The sync to merge into its upper neighbour: the one whose loss leaves the smallest gap relative to
    its age, so that recent syncs stay dense and old ones thin out roughly exponentially but stay covered
    (as MirrorMaker 2's store since KAFKA-14666), and a group far behind still translates, only less
    tightly. The oldest sync and the newest two are kept as they are."""
    newest = syncs[-1].upstream
    return min(range(1, len(syncs) - 3),
               key=lambda i: ((syncs[i + 1].upstream - syncs[i - 1].upstream) / (newest - syncs[i].upstream + 1), i))


class OffsetSyncStore:
    """Recent syncs per partition, by source offset, at most `max_syncs` (64) each (docs/decisions.md §7).

    A sync below a later one is kept, not dropped: it may be another writer's (a host that took over, a late
    one), whose copies translation must not pass. Of one run (its `mirrord.run.start` header) only the sync
    furthest along is kept: it shows all the others show. Beyond the limit, two neighbouring syncs become one
    that never answers higher than they did (`_merged`), so thinning never lets translation pass a copy the
    syncs read showed, whichever writer wrote them; only a group in an old run loses exactness."""

    def __init__(self, max_syncs: int = MAX_SYNCS_PER_PARTITION) -> None:
        self._max = max(4, max_syncs)  # the oldest, the newest two, and a pair to merge
        # by partition and target incarnation (never merged across incarnations), by source offset
        self._syncs: dict[tuple[str, int, str | None], list[OffsetSync]] = {}
        self._runs: dict[tuple[str, int, str | None], dict[tuple[int, int], OffsetSync]] = {}  # the same, by run
        self._incarnations: dict[tuple[str, int], set[str | None]] = {}  # the target incarnations each partition has

    def add(self, sync: OffsetSync) -> None:
        """A sync as read, with the earlier runs its writer sent along with it (into the same target topic), and
        its runs from before it heard of a recreation (into a topic unsure)."""
        for run in sync.earlier:
            self._add(replace(run, target_id=sync.target_id))
        for run in sync.before:
            self._add(replace(run, target_id=UNSURE))
        self._add(replace(sync, earlier=(), before=()) if sync.earlier or sync.before else sync)

    def _add(self, sync: OffsetSync) -> None:
        tp = (sync.topic, sync.partition, sync.target_id)
        self._incarnations.setdefault(tp[:2], set()).add(sync.target_id)
        syncs, runs = self._syncs.setdefault(tp, []), self._runs.setdefault(tp, {})
        self._insert(syncs, runs, sync)
        while len(syncs) > self._max:
            i = _least_needed(syncs)
            lower, upper = syncs[i], syncs[i + 1]
            del syncs[i:i + 2]
            del runs[_run(lower)], runs[_run(upper)]
            self._insert(syncs, runs, _merged(lower, upper))

    @staticmethod
    def _insert(syncs: list[OffsetSync], runs: dict[tuple[int, int], OffsetSync], sync: OffsetSync) -> None:
        run = _run(sync)
        held = runs.get(run)
        if held is not None:
            if held.upstream >= sync.upstream:
                return  # shown already
            syncs.remove(held)
        runs[run] = sync
        bisect.insort(syncs, sync, key=lambda s: s.upstream)

    def syncs(self, topic: str, partition: int, end: int | None = None) -> list[OffsetSync]:
        """The syncs held of a partition, of every target incarnation, below `end` (the target partition's end
        now; None: unknown), by source offset."""
        return sorted((s for label in self._incarnations.get((topic, partition), ())
                       for s in self._syncs[(topic, partition, label)] if end is None or s.downstream < end),
                      key=lambda s: s.upstream)

    def held(self, topic: str, partition: int) -> dict[str | None, list[OffsetSync]]:
        """The syncs held of a partition by the target incarnation they name (UNSURE: runs from before a
        recreation), each by source offset: all that translation knows of the partition."""
        return {label: list(self._syncs[(topic, partition, label)])
                for label in self._incarnations.get((topic, partition), ())}

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._incarnations)

    def translate(self, topic: str, partition: int, group_offset: int, target_id: str | None = None,
                  end: int | None = None) -> int | None:
        """Translation on the syncs that describe the target topic as it is; those naming an earlier incarnation
        of it may only lower the answer, and one past the partition's end is nobody's now. A group that was
        mirrored into a target topic deleted since (a sync of another incarnation begins at or below its offset)
        and that no sync of the topic as it is translates, reads the topic as it is from its start: 0, never
        ahead (its next records went with the old topic, or are in the new one where no sync read shows yet)."""
        held = self.syncs(topic, partition, end)
        if target_id is None:
            return translate(held, group_offset)
        now = [s for s in held if s.target_id in (None, target_id)]
        answer = translate(now, group_offset, [s for s in held if s.target_id not in (None, target_id)])
        if answer is None and any(s.target_id not in (None, UNSURE, target_id) and s.first <= group_offset
                                  for s in self.syncs(topic, partition)):
            return 0
        return answer


def parse_source_offsets(text: str | None) -> dict[tuple[str, int], int]:
    """Spark's Kafka source offsets, `{"topic": {"0": 42}}`, as (topic, partition) → offset; {} if none."""
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


class OffsetSyncsReader(TopicReader):
    """The offset-syncs topic, read from where the last call stopped, each record an OffsetSync; a tombstone
    (a retired writer's key, retirement.py) is none. `seen`, if given, hears of every record's key first."""

    what = "offset sync"

    def __init__(self, cluster, topic: str, seen: Callable[[object], None] | None = None):
        super().__init__(cluster, topic)
        self._seen = seen

    def decode(self, msg) -> OffsetSync | None:
        if self._seen is not None:
            self._seen(msg)
        if msg.value() is None:
            return None
        return decode(msg.key(), msg.value(), msg.headers())
