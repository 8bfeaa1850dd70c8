import struct

from mirrord.offsets import (
    MAX_SYNCS_PER_PARTITION,
    OffsetSync,
    OffsetSyncStore,
    decode,
    deleted_before_read,
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


def test_store_drops_syncs_above_a_rewind():
    store = OffsetSyncStore()
    for up, down in ((0, 0), (10, 10), (20, 20)):
        store.add(OffsetSync("t", 1, up, down))
    store.add(OffsetSync("t", 1, 15, 30))  # replayed batch after a crash: written again, later in the target
    assert [(s.upstream, s.downstream) for s in store.syncs("t", 1)] == [(0, 0), (10, 10), (15, 30)]
    assert store.translate("t", 1, 17) == 31


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


def test_records_below_the_log_start_that_were_not_read_are_lost():
    start, end = {("t", 0): 100, ("t", 1): 100}, {("t", 0): 200, ("t", 1): 200}
    # partition 0: retention moved the log start to 150, the first record read is 150
    # partition 1: nothing deleted, the whole range read
    lost = deleted_before_read(start, end, {("t", 0): 150, ("t", 1): 100}, {("t", 0): 150, ("t", 1): 0})
    assert lost == {("t", 0): (100, 150)}


def test_a_partition_deleted_entirely_loses_the_whole_planned_range():
    lost = deleted_before_read({("t", 0): 10}, {("t", 0): 30}, {}, {("t", 0): 30})
    assert lost == {("t", 0): (10, 30)}


def test_gaps_above_the_log_start_are_compaction_or_markers_not_loss():
    # first record read at 120 (compacted away or transaction markers below it), log start still 0
    assert deleted_before_read({("t", 0): 100}, {("t", 0): 200}, {("t", 0): 120}, {("t", 0): 0}) == {}


def test_records_read_before_retention_removed_them_are_not_counted_as_lost():
    # the batch read from 100 on; retention moved the log start to 180 afterwards
    assert deleted_before_read({("t", 0): 100}, {("t", 0): 200}, {("t", 0): 100}, {("t", 0): 180}) == {}


def test_a_resume_point_below_the_log_start_is_lost_up_to_it():
    held = {("t", 0): 50, ("t", 1): 0}
    assert deleted_before_read({("t", 0): 20, ("t", 1): 5}, held, {}, held) == {("t", 0): (20, 50)}


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
