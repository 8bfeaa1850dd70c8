"""The stage split of a stream (bench/stages.py) on made-up clock files: the measured window is the difference
of two reads, each stage's quantiles come from its own histogram, and a clock that never wrote gives no split.
The smoke test (tests/bench/test_smoke.py) reads a real one from mirrord's JVM."""

from __future__ import annotations

import json

from bench import stages


def clock(counts: dict[str, dict[int, int]], polls: int, polled: int, size: int = 10) -> dict:
    return {"sample": 16, "polls": polls, "polled": polled,
            "ms": {s: [counts.get(s, {}).get(ms, 0) for ms in range(size)] for s in stages.STAGES}}


def test_the_window_is_what_came_between_the_two_reads():
    start = clock({"fetched": {9: 50}, "acked": {9: 50}}, polls=10, polled=100)  # a slow start, left out
    end = clock({"fetched": {9: 50, 2: 60, 3: 40}, "handed": {3: 100}, "sent": {3: 100},
                 "acked": {9: 50, 5: 99, 8: 1}}, polls=30, polled=500)
    split = stages.summary(start, end)
    assert split["fetched"] == {"timed": 100, "p50_ms": 2, "p99_ms": 3}
    assert split["handed"] == split["sent"] == {"timed": 100, "p50_ms": 3, "p99_ms": 3}
    assert split["acked"] == {"timed": 100, "p50_ms": 5, "p99_ms": 5}
    assert split["records_per_poll"] == 20.0


def test_a_clock_read_only_at_the_end_counts_from_zero_and_one_never_written_gives_nothing(tmp_path):
    end = clock({"acked": {1: 3, 7: 1}}, polls=2, polled=8)
    assert stages.summary(None, end)["acked"] == {"timed": 4, "p50_ms": 1, "p99_ms": 7}
    assert stages.summary(None, end)["fetched"] == {"timed": 0, "p50_ms": None, "p99_ms": None}
    assert stages.summary(clock({}, 0, 0), None) is None
    path = tmp_path / "stages.json"
    assert stages.Window(path, after=0).close() is None  # no JVM wrote it: no split, no error
    path.write_text(json.dumps(end))
    assert stages.Window(path, after=30).close()["acked"]["timed"] == 4  # closed before the start was read
