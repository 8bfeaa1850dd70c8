from mirrord.offsets import OffsetSync, OffsetSyncStore, translate


def test_translation_never_extrapolates_and_never_skips():
    syncs = [OffsetSync("t", 0, 100, 10), OffsetSync("t", 0, 200, 50)]
    assert translate(syncs, 99) is None
    assert translate(syncs, 100) == 10
    assert translate(syncs, 150) == 11  # re-reads 11..: duplicates at worst, never loss (KAFKA-12468)
    assert translate(syncs, 200) == 50
    assert translate(syncs, 500) == 51


def test_store_drops_syncs_above_a_rewind_and_round_trips(tmp_path):
    store = OffsetSyncStore()
    for up, down in ((0, 0), (10, 10), (20, 20)):
        store.add(OffsetSync("t", 1, up, down))
    store.add(OffsetSync("t", 1, 15, 30))  # replayed batch after a crash: written again, later in the target
    assert [(s.upstream, s.downstream) for s in store.syncs("t", 1)] == [(0, 0), (10, 10), (15, 30)]
    store.save(tmp_path / "syncs.json")
    assert OffsetSyncStore.load(tmp_path / "syncs.json").translate("t", 1, 17) == 31
