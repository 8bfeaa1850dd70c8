"""Translation is never ahead of a group's true position, on the syncs as the offset-syncs topic stores
them, written by mirrord's own writer (docs/decisions.md §7).

A history: a source partition (with compaction gaps); writers (hosts, restarts, a late one) each copying a
stretch of it from some offset, some records dropped by a transform, some sends failing, their copies
interleaved in one target partition as concurrent producers' would be, records of other producers among
them (also before the first copy); possibly the target topic deleted and recreated midway.

The syncs are the real writer's: every history is replayed through mirrord's `OffsetSyncWriter` in one JVM
(`io.mirrord.sink.OffsetSyncReplay`, built by `make jars`): each writer's acknowledgements in order, a
failed send resetting its run, its thread's flush ticks at any moment, its delayed sync flushed at the end.
The syncs reach the topic in any order that keeps each writer's own. The topic is compacted by key, and
every sync of a partition has the same key (topic, partition): compaction may remove any sync a later one
follows (lazily, any subset of them, or as Kafka's cleaner leaves it: the newest of the cleaned part and
all the rest); the newest always stays. The reader reads what is left, in order, into an `OffsetSyncStore`
that thins each partition to its limit (64, and smaller limits so that short histories thin too).

The truth comes from the full record map: a group at source offset u may resume at target offset d only
if every record at or after u that has a copy in the current topic has its last copy at or after d (it
re-reads, never skips). Held here:
- every copy a writer acknowledged is shown by a sync that writer emitted (a sync's run maps [run start,
  upstream] one for one);
- translation (or None) is never ahead of the last copy of any record that the syncs read show: on every
  history where compaction removed nothing, or nothing that alone showed a record's last copy, that is the
  truth itself.
Where compaction removed every sync that showed a record's last copy, nothing read shows that copy, and no
rule reading this topic can respect it and still translate a target that held records before mirroring
(the last test here: two histories, the same syncs stored, different true positions); how often translation
then passes such a copy is counted (`STATS["outside"]`, printed with -s), and docs/decisions.md §7 says what
bounds it. Also outside: copies no sync was ever written for (a writer killed before it flushed its delayed
sync; records the interceptor does not hand to the writer).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirrord.jars import connector_jars
from mirrord.mm2.offsets import MAX_SYNCS_PER_PARTITION, OffsetSync, OffsetSyncStore

HISTORIES = int(os.environ.get("MIRRORD_OFFSETS_HISTORIES", "10000"))
STATS: Counter[str] = Counter()


class Replay:
    """io.mirrord.sink.OffsetSyncReplay: the real writer's rules, one JVM for every history of the module."""

    def __init__(self) -> None:
        import pyspark

        slf4j = sorted((Path(pyspark.__file__).parent / "jars").glob("slf4j-api-*.jar"))
        classpath = os.pathsep.join([*connector_jars(), *map(str, slf4j)])
        java = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME") else "java"
        self._err = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            [java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath, "io.mirrord.sink.OffsetSyncReplay"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True, bufsize=1)

    def syncs(self, lag_max: int, events: list[str]) -> list[tuple[str, OffsetSync]]:
        """Each emitted sync, in the order emitted, with the writer that emitted it."""
        self._proc.stdin.write("\n".join([f"h {lag_max}", *events, "e"]) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            self._proc.kill()
            self._err.seek(0)
            raise RuntimeError("io.mirrord.sink.OffsetSyncReplay ended (mirrord-jvm.jar from `make jars`?): "
                               + self._err.read()[-2000:].decode(errors="replace"))
        out = []
        for token in line.split():
            writer, up, down, run = token.split(":")
            out.append((writer, OffsetSync("t", 0, int(up), int(down), int(run))))
        return out

    def close(self) -> None:
        self._proc.stdin.close()
        self._proc.wait(timeout=30)
        self._err.close()


@pytest.fixture(scope="module")
def replay():
    r = Replay()
    yield r
    r.close()
    if STATS["histories"]:
        print(f"\noffset translation property: {dict(STATS)}")
    if STATS["histories"] >= 1000:  # the histories are what this module says they are
        for kind in ("compacted", "compacted away a last copy's syncs", "recreated", "thinned to 4",
                     f"thinned to {MAX_SYNCS_PER_PARTITION}"):
            assert STATS[kind] > 0, f"no history {kind}: {dict(STATS)}"


class Choices:
    """The choices of one history, read from bytes hypothesis draws (one draw per history: fast, and
    hypothesis still shrinks a failure to a short history); 0 once the bytes are used up."""

    def __init__(self, raw: bytes) -> None:
        self._raw, self._at = raw, 0

    def below(self, k: int) -> int:
        """A choice in [0, k), k at most 256."""
        if k <= 1 or self._at >= len(self._raw):
            return 0
        self._at += 1
        return self._raw[self._at - 1] % k


def history(c: Choices) -> tuple[list[str], list[int | None], int]:
    """(events for the replay, the current target topic as source offsets (None: another producer's record),
    the number of source offsets) of one history. A choice of 0 is the plain case, so that hypothesis shrinks
    towards it."""
    n = 1 + c.below(40) + (c.below(200) if c.below(6) == 5 else 0)  # now and then a long one
    offsets = [o for o in range(n) if c.below(8) != 7] or [0]  # some compacted away on the source
    queues = []
    for _ in range(1 + c.below(4)):
        start = c.below(len(offsets)) if c.below(2) else 0
        end = start + c.below(len(offsets) - start) if c.below(2) else len(offsets) - 1
        drop = c.below(4) == 3  # a transform drops some records
        queues.append([o for o in offsets[start:end + 1] if not (drop and c.below(3) == 2)])
    events: list[str] = []
    target: list[int | None] = [None] * c.below(4)  # the target topic held records before
    w, recreated = 0, False
    while any(queues):
        action = c.below(100)
        active = [v for v, q in enumerate(queues) if q]
        if w not in active or c.below(4) == 3:  # mostly a writer's stretch goes on; now and then another's
            w = active[c.below(len(active))]
        if action < 70:  # the target acknowledges the writer's next record
            offset = queues[w].pop(0)
            events.append(f"a w{w} {offset} {len(target)}")
            target.append(offset)
        elif action < 80:  # the writer's thread emits its delayed sync (every flush.ms)
            events.append(f"f w{w}")
        elif action < 86:  # the writer's next record fails: not written, its run reset
            queues[w].pop(0)
            events.append(f"r w{w}")
        elif action < 99:  # another producer's record
            target.append(None)
        else:  # the target topic deleted and recreated: offsets start again at 0
            target = []
            recreated = True
    STATS["recreated"] += recreated
    return events, target, n


def log_order(c: Choices, emitted: list[tuple[str, OffsetSync]]) -> list[OffsetSync]:
    """The syncs as the topic holds them: each writer's in the order it emitted them, the writers' interleaved
    in any way (a writer's thread writes late: batches, delayed syncs, a slow producer)."""
    spread = c.below(16)
    last: dict[str, int] = {}
    keyed = []
    for i, (writer, sync) in enumerate(emitted):
        last[writer] = key = max(last.get(writer, 0), i + c.below(spread + 1))
        keyed.append((key, i, sync))
    return [sync for _, _, sync in sorted(keyed)]


def compacted(c: Choices, log: list[OffsetSync]) -> list[OffsetSync]:
    """What compaction left: every sync has the key (topic, partition), so any sync a later one follows may
    be gone (compaction is lazy: any subset of them); the newest stays."""
    mode = c.below(4)
    if mode == 0:  # not compacted (yet)
        return log
    if mode == 1:  # as Kafka's cleaner leaves it: the newest of the cleaned part, and the part not cleaned yet
        cleaned = c.below(len(log))
        return [s for i, s in enumerate(log) if i >= cleaned or i == cleaned - 1]
    if mode == 2:  # lazily: any subset of the older ones
        return [s for s in log[:-1] if c.below(2)] + log[-1:]
    return log[-1:]  # fully: the newest only


def shown(syncs: list[OffsetSync]) -> set[tuple[int, int]]:
    """Every (source offset, target offset) the syncs show: a sync's run maps [first, upstream] one for one."""
    return {(s.first + k, s.downstream - (s.upstream - s.first) + k) for s in syncs
            for k in range(s.upstream - s.first + 1)}


def bounds(last: dict[int, int], top: int) -> list[float]:
    """For each group offset 0..top, the highest target offset it may resume at: the lowest of the given
    last copies of the records at or after it (inf if none)."""
    out = [float("inf")] * (top + 2)
    for u in range(top, -1, -1):
        out[u] = min(out[u + 1], last.get(u, float("inf")))
    return out


@settings(max_examples=HISTORIES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.binary(min_size=512, max_size=512))
def test_translation_is_never_ahead_of_the_groups_true_position(replay, raw):
    c = Choices(raw)
    events, target, n = history(c)
    emitted = replay.syncs((1, 2, 3, 5, 100)[c.below(5)], events)  # offset.lag.max
    for writer in {e.split()[1] for e in events}:
        acked = {(int(e.split()[2]), int(e.split()[3])) for e in events if e.startswith(f"a {writer} ")}
        unshown = acked - shown([s for w, s in emitted if w == writer])
        assert not unshown, f"copies of {writer} no sync of its shows: {sorted(unshown)}; {events}; {emitted}"

    log = log_order(c, emitted)
    stored = compacted(c, log)
    limit = (MAX_SYNCS_PER_PARTITION, 4, 5, 8)[c.below(4)]
    store = OffsetSyncStore(limit)
    for sync in stored:
        store.add(sync)

    last = {offset: position for position, offset in enumerate(target) if offset is not None}
    true = bounds(last, n)
    evidence = shown(stored)
    seen: dict[int, int] = {}  # the last copy the syncs read show, of each record that has one
    for position, offset in enumerate(target):
        if (offset, position) in evidence:
            seen[offset] = position
    known = bounds(seen, n)
    if len(stored) == len(log):
        assert known == true  # nothing compacted: the syncs read show every record's last copy

    outside = 0
    for group in range(n + 1):
        got = store.translate("t", 0, group)
        assert got is None or got <= known[group], (
            f"group {group} translated to {got}, past a copy at {known[group]}; target {target}; "
            f"syncs read {stored}; held {store.syncs('t', 0)}")
        STATS["groups"] += 1
        STATS["translated"] += got is not None
        outside += got is not None and got > true[group]
    STATS["outside"] += outside  # past a copy whose every sync compaction removed
    STATS["histories with groups outside"] += outside > 0
    STATS["histories"] += 1
    STATS["compacted"] += len(stored) < len(log)
    STATS["compacted away a last copy's syncs"] += known != true
    runs = len({(s.first, s.downstream - (s.upstream - s.first)) for s in stored})
    STATS[f"thinned to {limit}"] += runs > limit


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 30), st.integers(1, 80), st.integers(0, 40), st.sampled_from([1, 5, 100]),
       st.lists(st.integers(0, 79), max_size=5))
def test_one_writer_copying_one_for_one_translates_exactly(replay, first, count, existing, lag_max, ticks):
    """Where the syncs prove a contiguous copy (one writer, no gap), a group resumes exactly after its last
    record, also when the target held records before, and whatever compaction left of them."""
    events = []
    for i in range(count):
        events.append(f"a w {first + i} {existing + i}")
        if i in ticks:
            events.append("f w")
    syncs = [s for _, s in replay.syncs(lag_max, events)]
    for kept in (syncs, syncs[-1:]):  # as written; compacted to the newest
        store = OffsetSyncStore()
        for sync in kept:
            store.add(sync)
        for group in range(first, first + count):
            assert store.translate("t", 0, group) == existing + group - first, (group, kept)
        assert store.translate("t", 0, first + count) == existing + count


def test_compaction_can_leave_two_histories_the_same_syncs_and_different_true_positions(replay):
    """Why the property holds for the copies the syncs read show, and not for a copy whose every sync
    compaction removed (docs/decisions.md §7). In the first history the target topic held 3 records of
    another producer, and host b copied source offset 1 to 3. In the second, host a copied 0..2 to 0..2 and
    host b, taking over from a group offset of 1, copied 1 to 3; compaction kept b's sync, the newest of the
    key. The topic now holds the same syncs for both: a group at 1 resumes exactly at 3 in the first (the
    walkthrough of docs/decisions.md §2), and must resume at 2 or below in the second (record 2 is at 2 only)."""
    prefilled = [s for _, s in replay.syncs(100, ["a b 1 3"])]
    taken_over = [s for _, s in replay.syncs(100, ["a a 0 0", "a a 1 1", "a a 2 2", "f a", "a b 1 3"])]
    assert taken_over[-1:] == prefilled == [OffsetSync("t", 0, 1, 3, 1)]  # compacted: the newest stays
    store = OffsetSyncStore()
    for sync in prefilled:
        store.add(sync)
    true_prefilled, true_taken_over = 3, 2
    assert store.translate("t", 0, 1) == true_prefilled > true_taken_over
