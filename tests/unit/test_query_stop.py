"""A real-time query's stop counts as clean only once no task runs and nothing is in flight, and has stayed
so (mirrord/spark/query.py settled): Spark's count of running tasks lags its tasks by its queues."""

from __future__ import annotations

from mirrord.spark.query import DRAIN_POLL, SETTLE, settled


class Clock:
    """A fake monotonic clock that sleeps instantly, and the drained states a stop sees, one per look."""

    def __init__(self, seen: list[bool], then: bool):
        self.now = 0.0
        self.seen, self.then = list(seen), then

    def drained(self) -> bool:
        return self.seen.pop(0) if self.seen else self.then

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_drain_that_a_late_task_ends_is_not_clean_until_that_task_is_gone_too():
    # drained at the first look (the task's start not yet counted), then a task runs for 1 s, then drained
    clock = Clock([True] + [False] * 20, then=True)
    assert settled(clock.drained, 60, lambda: clock.now, clock.sleep)
    assert clock.now >= (1 + 20) * DRAIN_POLL + SETTLE - 1e-9, "clean before the late task had ended"


def test_a_drain_that_holds_is_clean_after_the_settle_time():
    clock = Clock([], then=True)
    assert settled(clock.drained, 60, lambda: clock.now, clock.sleep)
    assert SETTLE <= clock.now < SETTLE + 2 * DRAIN_POLL


def test_a_drain_that_never_holds_is_not_clean_at_the_grace():
    clock = Clock([], then=False)
    assert not settled(clock.drained, 3, lambda: clock.now, clock.sleep)
    assert 3 <= clock.now < 3 + 2 * DRAIN_POLL


def test_a_drain_that_comes_too_late_to_hold_is_not_clean():
    clock = Clock([False] * round((3 - SETTLE / 2) / DRAIN_POLL), then=True)
    assert not settled(clock.drained, 3, lambda: clock.now, clock.sleep)


def test_without_grace_a_stop_still_looks_long_enough_to_trust_a_drain():
    clock = Clock([], then=True)
    assert settled(clock.drained, 0, lambda: clock.now, clock.sleep)
