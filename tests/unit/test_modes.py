"""Which trigger mode runs, with how many streams, and why: plain logic over streams, task slots and the setting."""

from __future__ import annotations

import pytest

from mirrord.spark import modes


def test_auto_runs_real_time_mode_when_every_stream_has_a_slot_and_one_is_spare():
    mode = modes.choose("auto", streams=2, slots=3)
    assert (mode.name, mode.reason, mode.streams) == ("real-time", "2 streams, 3 task slots", 2)


def test_without_the_spare_slot_auto_runs_micro_batch_and_says_why():
    mode = modes.choose("auto", streams=4, slots=4)
    assert mode.name == "micro-batch"
    assert mode.reason == "4 streams need 5 task slots in real-time mode, the Spark master has 4"


def test_a_forced_real_time_mode_without_the_slots_falls_back_and_says_it_was_asked_for():
    mode = modes.choose("real-time", streams=4, slots=2)
    assert mode.name == "micro-batch"
    assert mode.reason.startswith("trigger = real-time, but 4 streams need 5 task slots")


def test_micro_batch_is_taken_as_asked_and_a_refusal_of_the_transforms_wins_over_slots():
    assert modes.choose("micro-batch", 2, 100) == modes.Mode("micro-batch", "trigger = micro-batch, 2 streams", 2)
    refused = modes.choose("auto", 1, 100, transforms_refused="an aggregation")
    assert refused.reason == "the transforms cannot run in real-time mode (an aggregation)"


@pytest.mark.parametrize(("num_streams", "cores", "cluster", "streams"),
                         [(None, 2, None, 2), (None, 16, None, 16), (3, 2, None, 3), (None, 2, 9, 8), (None, 2, 1, 1),
                          (5, 2, 9, 5)])
def test_streams_default_to_a_stream_per_core_or_per_cluster_slot_but_the_spare(num_streams, cores, cluster, streams):
    assert modes.default_streams(num_streams, cores, cluster) == streams


@pytest.mark.parametrize("streams", [1, 2, 64])
def test_mirrords_own_local_master_has_a_slot_per_stream_and_the_spare_whatever_the_partitions(streams):
    slots = modes.local_slots(streams)
    assert slots == streams + 1
    assert modes.choose("auto", streams, slots).name == "real-time"


@pytest.mark.parametrize(("master", "slots"), [("local", 1), ("local[7]", 7), ("local[*]", 16), ("local[3, 2]", 3),
                                               ("spark://h:7077", None), ("yarn", None)])
def test_a_masters_slots_are_read_from_its_url_where_it_is_local(master, slots):
    assert modes.master_slots(master, cores=16) == slots


def test_check_names_the_trigger_and_whether_the_transforms_run_in_real_time_mode():
    assert modes.check_line("micro-batch", 2) == "trigger = micro-batch: micro-batch mode"
    assert modes.check_line("auto", 2).endswith("; the 2 transforms run in real-time mode (filters and projections)")
