from mirrord.mm2.checkpoints import (
    Checkpoint,
    TargetNow,
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


def test_after_the_target_topic_was_recreated_its_old_syncs_checkpoints_and_group_offsets_are_not_used():
    """The target topic `t` was deleted and recreated (id new), 10 records in it now: the old topic's syncs (id old,
    and one of mirrord's before the header, past the end) put no group in it: a group they show mirrored reads the new
    topic from its start until the new topic's syncs say where its next record is, and a checkpoint or a target
    group offset past the end is replaced by a lower one."""
    syncs = OffsetSyncStore()
    syncs.add(OffsetSync("t", 0, 500, 900, 0, target_id="old"))
    syncs.add(OffsetSync("t", 0, 600, 1000, 600))
    now = TargetNow({"t": "new"}, {("t", 0): 10})
    assert group_checkpoints("g", {("t", 0): 550}, syncs, IdentityPolicy(), now=now)[("t", 0)].downstream == 0
    assert group_checkpoints("g", {("t", 0): 550}, syncs, IdentityPolicy())[("t", 0)].downstream == 901  # blind
    syncs.add(OffsetSync("t", 0, 509, 9, 500, target_id="new"))  # copied again into the new topic
    assert translated_offsets({("t", 0): 505}, syncs, IdentityPolicy(), {("t", 0): 950}, now) == {("t", 0): 5}
    assert translated_offsets({("t", 0): 505}, syncs, IdentityPolicy(), {("t", 0): 950}) == {}  # only forward
    old = Checkpoint("g", "t", 0, 550, 950)
    assert is_newer(Checkpoint("g", "t", 0, 505, 5), old)  # a rewind on the source: MirrorMaker 2's rule
    assert not is_newer(Checkpoint("g", "t", 0, 600, 9), old)
    assert is_newer(Checkpoint("g", "t", 0, 600, 9), old, now)


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
