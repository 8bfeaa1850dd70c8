from mirrord.checkpoints import translated_offsets, wanted_group
from mirrord.offsets import OffsetSync, OffsetSyncStore
from mirrord.policy import IdentityPolicy, PrefixPolicy


def store(*syncs: tuple[str, int, int, int]) -> OffsetSyncStore:
    s = OffsetSyncStore()
    for sync in syncs:
        s.add(OffsetSync(*sync))
    return s


def test_a_caught_up_group_translates_exactly_and_one_behind_never_past_its_position():
    syncs = store(("orders", 0, 0, 1000), ("orders", 0, 199, 1199), ("orders", 1, 0, 0), ("orders", 1, 99, 99))
    committed = {("orders", 0): 200, ("orders", 1): 60}
    assert translated_offsets(committed, syncs, PrefixPolicy("eu", "central"), {}) == {
        ("eu.orders", 0): 1200,  # at the end: exact
        ("eu.orders", 1): 1,  # between syncs 0 and 99: re-reads 1..59 on the target, skips nothing
    }


def test_target_offsets_only_move_forward_and_unsynced_partitions_are_left_alone():
    syncs = store(("t", 0, 0, 0), ("t", 0, 99, 99))
    committed = {("t", 0): 100, ("t", 1): 50}
    assert translated_offsets(committed, syncs, IdentityPolicy(), {("t", 0): 100}) == {}
    assert translated_offsets(committed, syncs, IdentityPolicy(), {("t", 0): 40}) == {("t", 0): 100}


def test_mirrords_own_group_and_excluded_groups_are_not_translated():
    assert wanted_group("billing", ".*", "console-consumer-.*|connect-.*|__.*", own="mirrord-east")
    assert not wanted_group("mirrord-east", ".*", "", own="mirrord-east")
    assert not wanted_group("console-consumer-4711", ".*", "console-consumer-.*|connect-.*|__.*", own="m")
    assert not wanted_group("billing", "orders-.*", "", own="m")
