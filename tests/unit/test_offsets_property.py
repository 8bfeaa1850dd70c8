"""Translation is never ahead of a group's true position, on the syncs as the offset-syncs topic stores
them, written by mirrord's own writer (docs/decisions.md §7).

A history: a source partition (with compaction gaps); writers (hosts, restarts, a late one) each copying a
stretch of it from some offset, some records dropped by a transform, some sends failing, their copies
interleaved in one target partition as concurrent producers' would be, records of other producers among
them (also before the first copy); possibly the target topic deleted and recreated midway, each writer
hearing of it (the new topic's id) some steps later, its syncs meanwhile naming the old topic's id.

The syncs are the real writer's: every history is replayed through mirrord's `OffsetSyncWriter` in one JVM
(`io.mirrord.sink.OffsetSyncReplay`, built by `make jars`): each writer's acknowledgements in order, a
failed send resetting its run, its thread's flush ticks at any moment, its delayed sync flushed at the end.
The syncs reach the topic in any order that keeps each writer's own. The topic is compacted by key, and a
sync's key is (topic, partition, writer): compaction may remove any sync a later one of the same writer
follows (lazily, any subset of them, or as Kafka's cleaner leaves it: the newest of each key in the cleaned
part, and all the rest); each writer's newest always stays, carrying the writer's earlier runs. The reader
reads what is left, in order, into an `OffsetSyncStore` that thins each partition to its limit (64, and
smaller limits so that short histories thin too), and translates with the target topic's id and end now. The
same topic is read again after up to two retirements of writers' keys (mirrord/mm2/retirement.py: the retirer's
syncs of what it read, the tombstones, its syncs again where a retired key wrote before its tombstone), compacted
the same way; a tombstone may go too.

The truth comes from the full record map: a group at source offset u may resume at target offset d only
if every record at or after u that has a copy in the current topic has its last copy at or after d (it
re-reads, never skips), and d is not past the topic's end (a recreated topic's old offsets). Held here:
- every copy a writer acknowledged after it last heard of the target topic's id is shown by a sync that writer
  emitted (a sync's run maps [run start, upstream] one for one);
- translation (or None) is never ahead of that truth, whatever compaction, thinning and retirement left;
- at the store's 64, retirement leaves no group untranslated that a reader of each writer's newest sync translates.
Outside: copies no sync was ever written for (a writer killed before it flushed its delayed sync; records the
interceptor does not hand to the writer), docs/decisions.md §7.
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
from mirrord.mm2.offsets import MAX_SYNCS_PER_PARTITION, UNSURE, OffsetSync, OffsetSyncStore, decode, writer_of
from mirrord.mm2.retirement import summary

HISTORIES = int(os.environ.get("MIRRORD_OFFSETS_HISTORIES", "5000"))
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
        """Each emitted sync, in the order emitted, with the writer that emitted it (its key)."""
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
            writer, up, down, run, earlier, target_id, before = token.split(":")
            target_id = UNSURE if target_id == "?" else target_id or None  # ?: not known to the writer
            out.append((writer, OffsetSync("t", 0, int(up), int(down), int(run), self._runs(earlier), target_id,
                                           self._runs(before))))
        return out

    @staticmethod
    def _runs(text: str) -> tuple[OffsetSync, ...]:
        values = [int(v) for v in text.split(",")] if text else []
        return tuple(OffsetSync("t", 0, *values[i:i + 3]) for i in range(0, len(values), 3))

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
        for kind in ("compacted", "compacted to each writer's newest", "carried earlier runs",
                     "carried earlier runs merged", "taken over behind a copy", "recreated",
                     "copied before a writer heard of the recreation", "copied before a writer knew the topic's id",
                     "thinned to 4", "retired",
                     "retired a key that wrote meanwhile",
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


def history(c: Choices) -> tuple[list[str], list[int | None], int, str]:
    """(events for the replay, the current target topic as source offsets (None: another producer's record),
    the number of source offsets, the target topic's id now) of one history. A choice of 0 is the plain case,
    so that hypothesis shrinks towards it."""
    n = 1 + c.below(40) + (c.below(200) if c.below(6) == 5 else 0)  # now and then a long one
    offsets = [o for o in range(n) if c.below(8) != 7] or [0]  # some compacted away on the source
    queues = []
    for _ in range(1 + c.below(4)):
        start = c.below(len(offsets)) if c.below(2) else 0
        end = start + c.below(len(offsets) - start) if c.below(2) else len(offsets) - 1
        drop = c.below(4) == 3  # a transform drops some records
        queues.append([o for o in offsets[start:end + 1] if not (drop and c.below(3) == 2)])
    # each writer asks the topic's id at its start; now and then the answer comes after its first copies
    late = {v for v in range(len(queues)) if c.below(4) == 3}
    events: list[str] = [f"n w{v}" if v in late else f"x w{v} 0" for v in range(len(queues))]
    target: list[int | None] = [None] * c.below(4)  # the target topic held records before
    w, recreated, incarnation = 0, False, 0
    unaware: set[int] = set(late)  # writers that have not heard of the topic's id or its recreation yet
    copied_unknown = False
    while any(queues):
        action = c.below(100)
        active = [v for v, q in enumerate(queues) if q]
        if w not in active or c.below(4) == 3:  # mostly a writer's stretch goes on; now and then another's
            w = active[c.below(len(active))]
        for v in sorted(unaware):
            if c.below(4) == 3:  # its next look at the target's topic ids
                events.append(f"x w{v} {incarnation}")
                unaware.discard(v)
        if action < 70:  # the target acknowledges the writer's next record
            copied_unknown = copied_unknown or f"n w{w}" in events and not any(
                e.startswith(f"x w{w} ") for e in events)
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
            incarnation += 1
            unaware = set(range(len(queues)))
    STATS["recreated"] += recreated
    STATS["copied before a writer heard of the recreation"] += recreated and bool(unaware)
    STATS["copied before a writer knew the topic's id"] += copied_unknown
    return events, target, n, str(incarnation)


def log_order(c: Choices, emitted: list[tuple[str, OffsetSync]]) -> list[tuple[str, OffsetSync]]:
    """The syncs as the topic holds them, with their writers: each writer's in the order it emitted them, the
    writers' interleaved in any way (a writer's thread writes late: batches, delayed syncs, a slow producer)."""
    spread = c.below(16)
    last: dict[str, int] = {}
    keyed = []
    for i, (writer, sync) in enumerate(emitted):
        last[writer] = key = max(last.get(writer, 0), i + c.below(spread + 1))
        keyed.append((key, i, writer, sync))
    return [(writer, sync) for _, _, writer, sync in sorted(keyed)]


def compacted(c: Choices, log: list[tuple[str, OffsetSync | None]]) -> list[tuple[str, OffsetSync | None]]:
    """What compaction left: a sync's key is (topic, partition, writer), so any sync a later one of its writer
    follows may be gone (compaction is lazy: any subset of them); each writer's newest stays, unless it is a
    tombstone (a retired key: None), which may go too once every earlier record of its key went."""
    newest = {writer: i for i, (writer, _) in enumerate(log)}
    mode = c.below(4)
    if mode == 0:  # not compacted (yet)
        keep = [True] * len(log)
    elif mode == 1:  # as Kafka's cleaner leaves it: the newest of each key in the cleaned part, and the rest
        cleaned = c.below(len(log) + 1)
        last = {writer: i for i, (writer, _) in enumerate(log[:cleaned])}
        keep = [i >= cleaned or last[writer] == i for i, (writer, _) in enumerate(log)]
    elif mode == 2:  # lazily: any subset of those a later one of their writer follows
        keep = [newest[writer] == i or c.below(2) == 1 for i, (writer, _) in enumerate(log)]
    else:  # fully: each writer's newest only
        keep = [newest[writer] == i for i, (writer, _) in enumerate(log)]
    for writer, i in newest.items():
        if log[i][1] is None and keep[i] and c.below(2):  # a tombstone past delete.retention.ms: its key gone
            keep = [k and w != writer for k, (w, _) in zip(keep, log, strict=True)]
    return [record for record, kept in zip(log, keep, strict=True) if kept]


def read(records: list[tuple[str, OffsetSync | None]], limit: int) -> OffsetSyncStore:
    """A reader's store of the records, as mirrord reads them: a tombstone is no sync."""
    store = OffsetSyncStore(limit)
    for _, sync in records:
        if sync is not None:
            store.add(sync)
    return store


def retiring(c: Choices, log: list[tuple[str, OffsetSync]], limit: int
             ) -> tuple[list[tuple[str, OffsetSync | None]], int]:
    """The topic with up to two retirements (mirrord/mm2/retirement.py), each by a retirer of its own (a host's
    process). A retirer read the topic to some point, as compaction left it then or all of it; it retires any of
    the keys live there but its own (the age rule may pick any: also a writer that writes again later). Its syncs
    of the partition land there (`retirement.summary`, encoded and decoded as the topic holds them); the
    writers' syncs may land after them, before the tombstones; then, if a retired key wrote meanwhile, the
    retirer's syncs again, from its store that read on to the tombstones. Returns the topic and how many
    retirements it had."""
    topic: list[tuple[str, OffsetSync | None]] = list(log)
    done = 0
    for r in range(c.below(3)):
        cut = c.below(len(topic) + 1)
        seen = compacted(c, topic[:cut]) if c.below(2) else topic[:cut]
        store = read(seen, limit)
        newest = {key: sync for key, sync in seen}
        own = f"r{r}:"
        retired = [key for key, sync in newest.items() if sync is not None and not key.startswith(own)
                   and c.below(4) != 0]
        records = summary(store, "t", 0, own.encode())
        if not retired or not records:
            continue
        ours = [(own + writer_of(k)[2].hex(), decode(k, v, h)) for k, v, h in records]
        late = topic[cut:min(len(topic), cut + c.below(4))]
        rest = topic[cut + len(late):]
        topic = topic[:cut] + ours + late + [(key, None) for key in retired]
        if any(key in retired and sync is not None for key, sync in late):
            for _, sync in late:
                if sync is not None:
                    store.add(sync)
            topic += [(own + writer_of(k)[2].hex(), decode(k, v, h))
                      for k, v, h in summary(store, "t", 0, own.encode())]
            STATS["retired a key that wrote meanwhile"] += 1
        topic += rest
        done += 1
        STATS["retired keys"] += len(retired)
    return topic, done


def shown(syncs: list[OffsetSync]) -> set[tuple[int, int]]:
    """Every (source offset, target offset) the syncs show: a sync's run maps [first, upstream] one for one."""
    return {(s.first + k, s.downstream - (s.upstream - s.first) + k) for s in syncs
            for k in range(s.upstream - s.first + 1)}


def bounds(last: dict[int, int], top: int, end: int) -> list[float]:
    """For each group offset 0..top, the highest target offset it may resume at: the lowest of the given
    last copies of the records at or after it, and never past the target partition's `end`."""
    out = [float(end)] * (top + 2)
    for u in range(top, -1, -1):
        out[u] = min(out[u + 1], last.get(u, float("inf")))
    return out


@settings(max_examples=HISTORIES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.binary(min_size=512, max_size=512))
def test_translation_is_never_ahead_of_the_groups_true_position(replay, raw):
    c = Choices(raw)
    events, target, n, target_id = history(c)
    emitted = replay.syncs((1, 2, 3, 5, 100)[c.below(5)], events)  # offset.lag.max
    for writer in {e.split()[1] for e in events}:
        heard = max(i for i, e in enumerate(events) if e.split()[:2] in (["x", writer], ["n", writer]))
        acked = {(int(e.split()[2]), int(e.split()[3])) for e in events[heard:] if e.startswith(f"a {writer} ")}
        unshown = acked - shown([s for w, s in emitted if w == writer])
        assert not unshown, f"copies of {writer} no sync of its shows: {sorted(unshown)}; {events}; {emitted}"

    log = log_order(c, emitted)
    stored = [sync for _, sync in compacted(c, log)]
    limit = (MAX_SYNCS_PER_PARTITION, 4, 5, 8)[c.below(4)]
    store = OffsetSyncStore(limit)
    for sync in stored:
        store.add(sync)
    topic, retirements = retiring(c, log, limit)
    if retirements:
        topic = compacted(c, topic)
        after = read(topic, limit)
        newest = {writer: sync for writer, sync in log}
        fully = read([(w, s) for w, s in log if s is newest[w]], limit)  # without retirement, compacted fully

    last = {offset: position for position, offset in enumerate(target) if offset is not None}
    true = bounds(last, n, len(target))
    for group in range(n + 1):
        got = store.translate("t", 0, group, target_id, len(target))
        assert got is None or got <= true[group], (
            f"group {group} translated to {got}, past a copy at {true[group]}; target {target}; "
            f"syncs read {stored}; held {store.syncs('t', 0)}")
        if retirements:
            retired = after.translate("t", 0, group, target_id, len(target))
            assert retired is None or retired <= true[group], (
                f"after retirement, group {group} translated to {retired}, past a copy at {true[group]}; "
                f"target {target}; topic {topic}; held {after.syncs('t', 0)}")
            base = fully.translate("t", 0, group, target_id, len(target))
            assert retired is not None or base is None or limit < MAX_SYNCS_PER_PARTITION, (
                f"after retirement, group {group} untranslated, {base} without; topic {topic}; "
                f"held {after.syncs('t', 0)}")
            STATS[f"after retirement ({limit}): " + ("same" if retired == base else "none" if retired is None else
                                          "answered" if base is None else
                                          "lower" if retired < base else "higher")] += 1
        STATS["groups"] += 1
        STATS["translated"] += got is not None
    STATS["histories"] += 1
    STATS["retired"] += retirements > 0
    STATS["compacted"] += len(stored) < len(log)
    STATS["compacted to each writer's newest"] += len(stored) == len({w for w, _ in log}) < len(log)
    STATS["carried earlier runs"] += any(s.earlier for s in stored)
    STATS["carried earlier runs merged"] += any(len(s.earlier) == 8 for _, s in emitted)
    STATS["taken over behind a copy"] += taken_over_behind(events)
    runs = len({(s.first, s.downstream - (s.upstream - s.first)) for s in stored})
    STATS[f"thinned to {limit}"] += runs > limit


def taken_over_behind(events: list[str]) -> bool:
    """A writer copied a record another writer had copied before it: what MirrorMaker 2's key alone could hide
    once compacted (a host taking over from a group behind what its predecessor copied)."""
    first: dict[str, str] = {}
    for e in events:
        if e.startswith("a "):
            _, writer, offset, _ = e.split()
            if first.setdefault(offset, writer) != writer:
                return True
    return False


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


def test_compaction_keeps_each_writers_newest_sync_so_a_taken_over_copy_stays_shown(replay):
    """The history that compaction made ambiguous under MirrorMaker 2's key (docs/decisions.md §7). In the
    first, the target topic held 3 records of another producer, and host b copied source offset 1 to 3. In the
    second, host a copied 0..2 to 0..2 and host b, taking over from a group offset of 1, copied 1 to 3. Keyed
    by (topic, partition) alone, compaction could leave the same single sync of b's in both, and a group at 1
    must resume at 3 in the first (exactly, the walkthrough of docs/decisions.md §2) but at 2 or below in the
    second (record 2 is at 2 only). Keyed by writer too, a's newest sync stays beside b's: each resumes right."""
    prefilled = [s for _, s in replay.syncs(100, ["a b 1 3"])]
    taken_over = replay.syncs(100, ["a a 0 0", "a a 1 1", "a a 2 2", "f a", "a b 1 3"])
    newest = {writer: sync for writer, sync in taken_over}  # fully compacted: each writer's newest
    assert prefilled == [newest["b"]] == [OffsetSync("t", 0, 1, 3, 1)]
    for kept, expected in ((prefilled, 3), (list(newest.values()), 1)):
        store = OffsetSyncStore()
        for sync in kept:
            store.add(sync)
        assert store.translate("t", 0, 1) == expected


def test_a_writers_newest_sync_carries_its_earlier_runs(replay):
    """A writer that rewound (a failed send, then its records again) and copied less far the second time: its
    newest sync alone still shows the first run's copies, so a group there is not translated past them."""
    events = [f"a w {o} {o}" for o in range(10)] + ["r w"] + [f"a w {o} {o + 6}" for o in range(4, 7)]
    syncs = [s for _, s in replay.syncs(100, events)]
    newest = syncs[-1]
    assert (newest.upstream, newest.downstream, newest.first) == (6, 12, 4)
    assert [(r.upstream, r.downstream, r.first) for r in newest.earlier] == [(9, 9, 0)]
    store = OffsetSyncStore()
    store.add(newest)
    assert store.translate("t", 0, 8) == 8  # record 8's only copy is at 8: the run 4..6 alone would say 13
