"""Translation is never ahead of a group's true position, whatever the history of copies (issue 16).

A history: a source partition (with compaction gaps); writers (hosts, restarts, a late one) each copying
a stretch of it from some offset, some records dropped by a transform, their copies interleaved in one
target partition as concurrent producers' would be; possibly the target topic deleted and recreated
midway. Each writer's syncs follow the interceptor's rules (a Python model of OffsetSyncWriter's
PartitionState: a sync at every discontinuity, at least every offset.lag.max records, the last one
delayed and flushed), and reach the store in any order. The truth comes from the full record map:
a group at source offset u may resume at d only if every record at or after u that has a copy in the
current topic has one at or after d.

Outside what this holds: a writer killed before it flushed its delayed sync, whose last copies no sync
shows, next to another writer's later copies (docs/decisions.md, section 6).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mirrord.mm2.offsets import MAX_SYNCS_PER_PARTITION, OffsetSync, OffsetSyncStore

LAG_MAX = 5


class WriterRules:
    """OffsetSyncWriter.PartitionState, in Python: which syncs one writer emits as its records are acked."""

    def __init__(self) -> None:
        self.started = self.pending = False
        self.prev_up = self.prev_down = self.run_start = self.last_synced = 0
        self.out: list[OffsetSync] = []

    def acked(self, up: int, down: int) -> None:
        first = None
        if not self.started or up != self.prev_up + 1 or down != self.prev_down + 1:
            if self.pending:
                self.out.append(OffsetSync("t", 0, self.prev_up, self.prev_down, self.run_start))
            first = OffsetSync("t", 0, up, down, up)
            self.pending, self.run_start, self.started = False, up, True
        elif down - (self.last_synced + 1) >= LAG_MAX:
            self.pending = False
            first = OffsetSync("t", 0, up, down, self.run_start)
        else:
            self.pending = True
        self.prev_up, self.prev_down = up, down
        if first is not None:
            self.out.append(first)
            self.last_synced = down

    def flush(self) -> None:
        if self.pending:
            self.pending = False
            self.out.append(OffsetSync("t", 0, self.prev_up, self.prev_down, self.run_start))


@st.composite
def histories(draw):
    n = draw(st.integers(5, 60))
    offsets = [o for o in range(n) if not draw(st.booleans()) or o % 7]  # some compacted away
    writers = []
    for _ in range(draw(st.integers(1, 4))):
        start = draw(st.integers(0, len(offsets) - 1))
        length = draw(st.integers(1, len(offsets) - start))
        dropped = draw(st.sets(st.integers(start, start + length - 1), max_size=length // 3))
        writers.append([offsets[i] for i in range(start, start + length) if i not in dropped])
    # the writers' copies interleaved, each in its own order, as concurrent producers land in one partition
    queues = [list(w) for w in writers if w]
    order = []
    while queues:
        q = draw(st.integers(0, len(queues) - 1))
        order.append((q, queues[q].pop(0)))
        queues = [x for x in queues if x] if not queues[q] else queues
        if not queues:
            break
    recreate_at = draw(st.one_of(st.none(), st.integers(0, max(0, len(order) - 1))))
    shuffle = draw(st.randoms(use_true_random=False))
    return order, recreate_at, shuffle


def replay(order, recreate_at):
    """The target partition's copies (current topic only) and every writer's syncs (old topic's too)."""
    rules: dict[int, WriterRules] = {}
    target: list[int] = []
    for i, (writer, offset) in enumerate(order):
        if i == recreate_at:
            target = []  # deleted and recreated: offsets start again at 0
        rules.setdefault(writer, WriterRules()).acked(offset, len(target))
        target.append(offset)
    for r in rules.values():
        r.flush()
    return target, [s for r in rules.values() for s in r.out]


def safe_bound(target: list[int], group: int) -> float:
    """The highest target offset a group at `group` may resume at: the lowest last copy of a record >= group."""
    last: dict[int, int] = {}
    for position, offset in enumerate(target):
        last[offset] = position
    return min((p for o, p in last.items() if o >= group), default=float("inf"))


@settings(max_examples=3000, deadline=None)
@given(histories())
def test_translation_is_never_ahead_of_the_groups_true_position(history):
    order, recreate_at, shuffle = history
    target, syncs = replay(order, recreate_at)
    shuffle.shuffle(syncs)  # syncs read in any order
    store = OffsetSyncStore()
    for sync in syncs:
        store.add(sync)
    if len(store.syncs("t", 0)) == MAX_SYNCS_PER_PARTITION:
        return  # thinned: outside this property (a long history's old syncs thin out)
    top = max(offset for _, offset in order) + 2
    for group in range(top):
        got = store.translate("t", 0, group)
        assert got is None or got <= safe_bound(target, group), (group, got, target, syncs)


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 30), st.integers(1, 80), st.integers(0, 40))
def test_one_writer_copying_one_for_one_translates_exactly(first, count, existing):
    """Where the syncs prove a contiguous copy (one writer, no gap), a group resumes exactly after its last
    record, also when the target held records before."""
    rules = WriterRules()
    for i in range(count):
        rules.acked(first + i, existing + i)
    rules.flush()
    store = OffsetSyncStore()
    for sync in rules.out:
        store.add(sync)
    for group in range(first, first + count):
        assert store.translate("t", 0, group) == existing + group - first
