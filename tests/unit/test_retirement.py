"""Which offset-sync keys the active host retires, and its syncs of what they showed (mirrord/mm2/retirement.py;
the property that translation stays behind the truth: test_offsets_property.py)."""

from __future__ import annotations

from mirrord.mm2.offsets import OffsetSync, OffsetSyncStore, decode, encode
from mirrord.mm2.retirement import RETIRE_AFTER, SyncKeys, retirable, summary

NOW = 1_000_000_000_000
OLD = NOW - int(RETIRE_AFTER * 1000) - 1


class Msg:
    """A record of the offset-syncs topic as confluent-kafka hands it over."""

    def __init__(self, key: bytes, value: bytes | None, offset: int, timestamp: int):
        self._key, self._value, self._offset, self._timestamp = key, value, offset, timestamp

    def key(self):
        return self._key

    def value(self):
        return self._value

    def offset(self):
        return self._offset

    def timestamp(self):
        return 1, self._timestamp


def record(writer: bytes, upstream: int, offset: int, timestamp: int, partition: int = 0) -> Msg:
    key, value, _ = encode(OffsetSync("t", partition, upstream, upstream), writer)
    return Msg(key, value, offset, timestamp)


def test_keys_idle_long_enough_are_retired_but_the_retirers_own_and_mirrormaker_2s_are_not():
    keys = SyncKeys()
    for msg in (record(b"old-wrtr", 5, 0, OLD), record(b"live-wrt", 9, 1, NOW), record(b"own-syncs", 5, 2, OLD),
                record(b"", 3, 3, OLD), record(b"old-wrtr", 7, 4, OLD, partition=1),
                Msg(record(b"gone-wrt", 1, 5, OLD).key(), None, 6, NOW)):  # a tombstone: the key is gone
        keys.seen(msg)
    plan = retirable(keys.live, NOW, own={b"own-syncs"})
    assert plan == {("t", 0): [record(b"old-wrtr", 0, 0, 0).key()], ("t", 1): [record(b"old-wrtr", 0, 0, 0, 1).key()]}
    assert retirable(keys.live, OLD + 1, own=set()) == {}  # nothing idle long enough then


def test_a_retired_key_that_writes_before_its_tombstone_marks_its_partition_for_the_retirers_syncs_again():
    keys = SyncKeys()
    first = record(b"old-wrtr", 5, 0, OLD)
    keys.seen(first)
    keys.retiring.add(first.key())
    keys.seen(record(b"old-wrtr", 8, 1, NOW))
    assert keys.meanwhile == {("t", 0)}
    keys.seen(Msg(first.key(), None, 2, NOW))
    assert first.key() not in keys.live and not keys.retiring


def test_the_retirers_syncs_hold_what_the_store_held_of_every_target_incarnation():
    store = OffsetSyncStore()
    store.add(OffsetSync("t", 0, 9, 9, 0, target_id="a"))  # records 0..9 at 0..9 of incarnation a
    store.add(OffsetSync("t", 0, 19, 29, 15, target_id="a"))
    store.add(OffsetSync("t", 0, 4, 1, 3, target_id="b", before=(OffsetSync("t", 0, 2, 12, 0),)))
    records = summary(store, "t", 0, b"retirer1")
    assert len(records) == 2 and len({key for key, _, _ in records}) == 2  # a key per incarnation
    assert decode(*records[-1]).upstream == 19  # the newest last: MirrorMaker 2's reader takes it as the latest
    again = OffsetSyncStore()
    for key, value, headers in records:
        again.add(decode(key, value, headers))
    assert again.held("t", 0) == store.held("t", 0)
    for group in range(21):
        for target_id in ("a", "b", None):
            assert again.translate("t", 0, group, target_id) == store.translate("t", 0, group, target_id)


def test_the_retirement_job_runs_unless_offset_syncs_retire_enabled_is_false(tmp_path):
    """`offset.syncs.retire.enabled = false` keeps the topic free of tombstones, for MirrorMaker 2's checkpoint
    connector (docs/operations.md): the active host's offset-syncs job is then never due."""
    from types import SimpleNamespace

    from mirrord.metrics import Metrics
    from mirrord.supervisor.jobs import SideJobs

    settings = SimpleNamespace(state_dir=tmp_path, emit_checkpoints_interval=60.0, retire_offset_syncs=True)
    jobs = SideJobs(SimpleNamespace(flow=SimpleNamespace(settings=settings)),
                    SimpleNamespace(ready=True, retire=lambda: 0), SimpleNamespace(all_up=lambda: True),
                    SimpleNamespace(active=lambda: True), Metrics("f"))
    retire = next(job for job in jobs.jobs() if job.name == "offset-syncs")
    assert retire.enabled()
    settings.retire_offset_syncs = False
    assert not retire.enabled()
