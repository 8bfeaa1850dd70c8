import pytest

from mirrord.mm2.heartbeats import Heartbeat, decode, encode, loops_back, newest_through_the_flow


def test_heartbeats_are_serialized_as_mirrormaker_2s_heartbeat_class():
    beat = Heartbeat("left", "right", 1_700_000_000_123)
    key, value = encode(beat)
    assert key == b"\x00\x04left\x00\x05right"
    assert value == b"\x00\x00" + (1_700_000_000_123).to_bytes(8, "big")
    assert decode(key, value) == beat
    with pytest.raises(Exception):  # noqa: B017 - any decoding error: the reader skips such records
        decode(key + b"x", value)


def test_liveness_counts_only_heartbeats_that_were_written_into_the_source():
    arrived = [Heartbeat("right", "left", 5_000), Heartbeat("left", "right", 9_000), Heartbeat("x", "left", 7_000)]
    assert newest_through_the_flow(arrived, "left") == 7_000
    assert newest_through_the_flow([Heartbeat("left", "right", 9_000)], "left") is None


def test_a_flows_own_heartbeat_on_its_source_is_a_loop():
    assert loops_back([Heartbeat("right", "left", 1), Heartbeat("left", "right", 2)], "left", "right")
    assert not loops_back([Heartbeat("right", "left", 1)], "left", "right")
