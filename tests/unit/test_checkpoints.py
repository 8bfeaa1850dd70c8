from mirrord.mm2.checkpoints import (
    Checkpoint,
    checkpoints_topic,
    decode,
    encode,
    group_checkpoints,
    is_newer,
    translated_offsets,
    wanted_group,
)
from mirrord.mm2.offsets import OffsetSync, OffsetSyncStore
from mirrord.settings.policy import IdentityPolicy, PrefixPolicy


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


def test_checkpoints_are_serialized_as_mirrormaker_2s_checkpoint_class():
    cp = Checkpoint("billing", "eu.orders", 3, 200, 1200, "")
    key, value = encode(cp)
    assert key == b"\x00\x07billing" + b"\x00\x09eu.orders" + b"\x00\x00\x00\x03"
    assert value == b"\x00\x00" + (200).to_bytes(8, "big") + (1200).to_bytes(8, "big") + b"\x00\x00"
    assert decode(key, value) == cp
    assert decode(*encode(Checkpoint("g", "t", 0, 5, 7, "meta é"))).metadata == "meta é"


def test_checkpoints_carry_the_target_topic_and_only_translatable_partitions():
    syncs = store(("orders", 0, 0, 1000), ("orders", 0, 199, 1199))
    found = group_checkpoints("billing", {("orders", 0): 200, ("orders", 1): 50}, syncs, PrefixPolicy("eu", "c"))
    assert found == {("eu.orders", 0): Checkpoint("billing", "eu.orders", 0, 200, 1200)}
    assert checkpoints_topic("eu") == "eu.checkpoints.internal"


def test_a_checkpoint_never_goes_backwards_unless_the_group_rewound_on_the_source():
    old = Checkpoint("g", "t", 0, upstream=100, downstream=500)
    assert is_newer(old, None)
    assert not is_newer(old, old)
    assert is_newer(Checkpoint("g", "t", 0, 120, 520), old)
    assert not is_newer(Checkpoint("g", "t", 0, 120, 490), old), "coarser translation must not move it back"
    assert is_newer(Checkpoint("g", "t", 0, 50, 450), old), "the group rewound on the source"


def test_a_checkpoint_carries_the_metadata_the_group_committed_with_its_offset():
    syncs = store(("t", 0, 0, 0), ("t", 0, 99, 99), ("t", 1, 0, 0), ("t", 1, 99, 99))
    cps = group_checkpoints("billing", {("t", 0): 100, ("t", 1): 100}, syncs, IdentityPolicy(),
                            {("t", 0): "epoch=7"})
    assert cps[("t", 0)].metadata == "epoch=7" and cps[("t", 1)].metadata == ""
    assert decode(*encode(cps[("t", 0)])).metadata == "epoch=7"
