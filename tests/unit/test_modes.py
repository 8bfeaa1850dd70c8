"""Which trigger mode runs, and why: plain logic over partitions, task slots and the setting."""

from __future__ import annotations

import pytest

from mirrord import modes


def test_auto_runs_real_time_mode_when_every_partition_has_a_slot_and_one_is_spare():
    mode = modes.choose("auto", partitions=12, slots=13)
    assert (mode.name, mode.reason) == ("real-time", "12 source partitions, 13 task slots")


def test_without_the_spare_slot_auto_runs_micro_batch_and_says_why():
    mode = modes.choose("auto", partitions=12, slots=12)
    assert mode.name == "micro-batch"
    assert mode.reason == "12 source partitions need 13 task slots in real-time mode, the Spark master has 12"


def test_auto_stops_at_the_measured_partition_limit_but_an_explicit_choice_does_not():
    many = modes.REAL_TIME_MAX_PARTITIONS + 1
    assert modes.choose("auto", many, many * 2).name == "micro-batch"
    assert modes.choose("real-time", many, many * 2).name == "real-time"


def test_on_a_local_master_auto_stops_at_the_measured_partitions_per_core():
    limit = modes.REAL_TIME_PARTITIONS_PER_CORE * 2
    assert modes.choose("auto", limit, limit * 2, cores=2).name == "real-time"
    mode = modes.choose("auto", limit + 1, limit * 2, cores=2)
    assert (mode.name, mode.reason) == ("micro-batch", f"{limit + 1} source partitions, more than real-time mode "
                                                       f"pays for on 2 cores in local mode (48 a core)")
    assert modes.choose("real-time", limit + 1, limit * 2, cores=2).name == "real-time"  # asked for: run it
    assert modes.choose("auto", limit + 1, limit * 2).name == "real-time"  # a cluster's slots are its cores
    assert not modes.local_real_time_pays(480, 2) and modes.local_real_time_pays(96, 2)
    # mirrord's own master is then local[num.streams]: the reason is still the partitions per core
    assert modes.choose("auto", 480, 2, cores=2).reason.endswith("on 2 cores in local mode (48 a core)")


def test_a_forced_real_time_mode_without_the_slots_falls_back_and_says_it_was_asked_for():
    mode = modes.choose("real-time", partitions=4, slots=2)
    assert mode.name == "micro-batch"
    assert mode.reason.startswith("trigger = real-time, but 4 source partitions need 5 task slots")


def test_micro_batch_is_taken_as_asked_and_a_refusal_of_the_transforms_wins_over_slots():
    assert modes.choose("micro-batch", 1, 100) == modes.Mode("micro-batch", "trigger = micro-batch")
    refused = modes.choose("auto", 1, 100, transforms_refused="an aggregation")
    assert refused.reason == "the transforms cannot run in real-time mode (an aggregation)"


@pytest.mark.parametrize(("partitions", "streams", "slots"), [(0, 1, 32), (12, 2, 32), (100, 2, 126), (10, 64, 64)])
def test_mirrords_own_local_master_has_a_slot_per_partition_a_spare_and_room_to_grow(partitions, streams, slots):
    assert modes.local_slots(partitions, streams) == slots
    assert modes.choose("auto", partitions, slots).name == "real-time"


@pytest.mark.parametrize(("master", "slots"), [("local", 1), ("local[7]", 7), ("local[*]", 16), ("local[3, 2]", 3),
                                               ("spark://h:7077", None), ("yarn", None)])
def test_a_masters_slots_are_read_from_its_url_where_it_is_local(master, slots):
    assert modes.master_slots(master, cores=16) == slots


def test_check_names_the_trigger_and_whether_the_transforms_run_in_real_time_mode():
    assert modes.check_line("micro-batch", 2) == "trigger = micro-batch: micro-batch mode"
    assert modes.check_line("auto", 2).endswith("; the 2 transforms run in real-time mode (filters and projections)")
