import struct

from mirrord.mm2.offsets import (
    MAX_SYNCS_PER_PARTITION,
    UNSURE,
    OffsetSync,
    OffsetSyncStore,
    decode,
    parse_source_offsets,
    translate,
)


def test_translation_never_extrapolates_and_never_skips():
    syncs = [OffsetSync("t", 0, 100, 10), OffsetSync("t", 0, 200, 50)]
    assert translate(syncs, 99) is None
    assert translate(syncs, 100) == 10
    assert translate(syncs, 150) == 11  # re-reads 11..: duplicates at worst, never loss (KAFKA-12468)
    assert translate(syncs, 200) == 50
    assert translate(syncs, 500) == 51


def test_a_replay_keeps_the_first_copy_and_translation_does_not_pass_it():
    store = OffsetSyncStore()
    for up, down in ((0, 0), (10, 10), (20, 20)):
        store.add(OffsetSync("t", 1, up, down))
    store.add(OffsetSync("t", 1, 15, 30))  # replayed batch after a crash: written again, later in the target
    assert [(s.upstream, s.downstream) for s in store.syncs("t", 1)] == [(0, 0), (10, 10), (15, 30), (20, 20)]
    assert store.translate("t", 1, 17) == 20  # 17..19 again after the replay's 30: re-read, never skipped


def test_a_late_writers_records_after_a_take_over_do_not_move_a_group_past_the_new_writers():
    """Issue 16, scenario 1: host A copies 1000..1049 to 5000..5049 with 1050..1099 still buffered; B takes
    over from the group's 1000 and writes 1000..1199 at 5050..5249; A's buffered 1050..1099 land at
    5250..5299. A group at 1150 must resume at B's copy of 1150 (5200), one at 1060 at B's 1060 (5110)."""
    a1 = OffsetSync("t", 0, 1049, 5049, run_start=1000)
    b = [OffsetSync("t", 0, 1000, 5050, run_start=1000), OffsetSync("t", 0, 1099, 5149, run_start=1000),
         OffsetSync("t", 0, 1199, 5249, run_start=1000)]
    a2 = [OffsetSync("t", 0, 1050, 5250, run_start=1050), OffsetSync("t", 0, 1099, 5299, run_start=1050)]
    for arrival in ([a1, *b, *a2], [a1, *a2, *b], [*b, a1, *a2]):  # however the syncs were written and read
        store = OffsetSyncStore()
        for sync in arrival:
            store.add(sync)
        assert store.translate("t", 0, 1150) == 5200
        assert store.translate("t", 0, 1060) == 5110
        assert store.translate("t", 0, 1010) == 5010  # A's own first copy of 1010: re-reads B's copies too


def test_a_recreated_target_topic_is_read_from_its_start_by_a_group_behind_the_recreation():
    """Issue 16, scenario 4: syncs of the deleted topic (0..999 at 0..999) stay in the store; the new topic
    got 1000.. at 0..: a group at 300 must read the new topic from its start, not from 300."""
    syncs = [OffsetSync("t", 0, 0, 0, run_start=0), OffsetSync("t", 0, 999, 999, run_start=0),
             OffsetSync("t", 0, 1000, 0, run_start=1000), OffsetSync("t", 0, 1499, 499, run_start=1000)]
    assert translate(syncs, 300) == 0
    assert translate(syncs, 1200) == 200  # inside the new topic's run: exact


def test_a_sync_written_before_its_writer_knew_the_target_topics_id_never_puts_a_group_past_the_new_topic():
    """Issue 31, item 3 (a checkpoint one record ahead, seen once in make test). The old target topic's first sync
    was written before its writer knew that topic's id: it names the id as unknown (an empty header). After the
    target topic was deleted and recreated, and while the new topic's first copy (source 10 at 0) has no sync read
    yet, a group at 6, whose next records went with the deleted topic, reads the new topic from its start (it got 1,
    MirrorMaker 2's + 1 on that sync, past the new topic's first record)."""
    key = struct.pack(">h", 1) + b"t" + struct.pack(">i", 0) + bytes(8)

    def sync(upstream: int, downstream: int, run_start: int, target_id: bytes) -> OffsetSync:
        return decode(key, struct.pack(">qq", upstream, downstream),
                      [("mirrord.run.start", struct.pack(">q", run_start)), ("mirrord.target.topic.id", target_id)])

    store = OffsetSyncStore()
    store.add(sync(0, 0, 0, b""))
    assert store.syncs("t", 0)[0].target_id == UNSURE
    store.add(sync(9, 9, 1, b"old"))
    assert store.translate("t", 0, 6, target_id="new", end=1) == 0  # the new topic from its start
    assert store.translate("t", 0, 10, target_id="new", end=1) == 0  # also a group caught up with the old one
    store.add(sync(10, 0, 10, b"new"))
    assert store.translate("t", 0, 6, target_id="new", end=1) == 0
    store.add(sync(12, 2, 10, b"new"))
    assert store.translate("t", 0, 11, target_id="new", end=3) == 1
    assert store.translate("t", 0, 13, target_id="new", end=3) == 3
    # before the recreation, with the id known: the unsure sync lowers, the named one answers exactly
    old = OffsetSyncStore()
    old.add(sync(0, 0, 0, b""))
    assert old.translate("t", 0, 0, target_id="old", end=1) is None
    old.add(sync(9, 9, 0, b"old"))
    assert old.translate("t", 0, 6, target_id="old", end=10) == 6


def test_inside_a_contiguous_run_translation_is_exact_even_when_target_offsets_differ():
    # the target topic held 1 000 records before mirroring began: target = source + 1 000
    syncs = [OffsetSync("t", 0, 0, 1000, run_start=0), OffsetSync("t", 0, 101, 1101, run_start=0),
             OffsetSync("t", 0, 180, 1180, run_start=0)]
    assert translate(syncs, 5) == 1005  # consumed 0..4: resumes at the 6th record, not at sync 0's +1
    assert translate(syncs, 150) == 1150
    assert translate(syncs, 180) == 1180
    assert translate(syncs, 181) == 1181  # just past the newest sync: its +1, still exact
    assert translate(syncs, 300) == 1181  # beyond what was mirrored: never ahead


def test_a_gap_ends_a_run_and_translation_inside_the_gap_is_never_ahead():
    # records 0..49 copied, 50..79 compacted away on the source, 80..99 copied; another writer put
    # 5 records into the target between them, so 80 landed at 55
    syncs = [OffsetSync("t", 0, 0, 0, run_start=0), OffsetSync("t", 0, 49, 49, run_start=0),
             OffsetSync("t", 0, 80, 55, run_start=80), OffsetSync("t", 0, 99, 74, run_start=80)]
    assert translate(syncs, 30) == 30
    assert translate(syncs, 60) == 50  # inside the gap: right after the last record it consumed
    assert translate(syncs, 85) == 60
    assert translate(syncs, 100) == 75


def test_mirrormaker2_syncs_without_a_run_translate_by_its_rule():
    syncs = [OffsetSync("t", 0, 100, 10), OffsetSync("t", 0, 200, 110)]
    assert translate(syncs, 150) == 11


def test_offset_sync_records_are_read_in_mirrormaker2s_format():
    key = struct.pack(">h", 6) + b"orders" + struct.pack(">i", 3)
    value = struct.pack(">qq", 1234, 5678)
    assert decode(key, value) == OffsetSync("orders", 3, 1234, 5678)
    assert decode(key, value, [("mirrord.run.start", struct.pack(">q", 1000))]) == \
        OffsetSync("orders", 3, 1234, 5678, run_start=1000)


def test_source_offsets_of_spark_progress_are_parsed_per_partition():
    assert parse_source_offsets('{"orders":{"0":5,"1":7},"clicks":{"0":0}}') == {
        ("orders", 0): 5, ("orders", 1): 7, ("clicks", 0): 0}
    assert parse_source_offsets("None") == {} and parse_source_offsets("null") == {}
    assert parse_source_offsets(None) == {}


def test_a_long_history_keeps_recent_syncs_dense_and_old_ones_covered():
    store = OffsetSyncStore()
    for offset in range(0, 100_000, 10):  # a sync every 10 records, target offsets 5 000 higher
        store.add(OffsetSync("t", 0, offset, offset + 5_000))
    kept = [s.upstream for s in store.syncs("t", 0)]
    assert len(kept) == MAX_SYNCS_PER_PARTITION and kept[0] == 0 and kept[-1] == 99_990
    assert kept[-2] == 99_980  # the newest stay exact
    for group_offset in (5, 1_234, 50_000, 99_985):  # never past the true target offset: re-reads, no skips
        assert store.translate("t", 0, group_offset) <= group_offset + 5_000
    assert store.translate("t", 0, 99_990) == 104_990
