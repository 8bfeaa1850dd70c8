"""Periodic side jobs, the MirrorMaker 2 way: one small scheduler, each job a name, an interval and a
plain function.

Every run is timed (`mirrord_task_duration_seconds{task}`) and logged at debug ("topics took 3 ms");
a run that raises is logged, counted in `mirrord_errors_total{kind=<job>}` and tried again at the
next tick, never fatal: a cluster that does not answer now may answer in a minute (docs/decisions.md
§5). A job's function returns how many of its items failed (groups it could not translate, topics it
could not configure), counted the same way. Enabled flags and intervals are read at every tick, so a
reload applies without restarting jobs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from mirrord.metrics import Metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    name: str
    interval: Callable[[], float]  # seconds until the next run, read after each run
    run: Callable[[], int]  # returns how many items failed
    enabled: Callable[[], bool] = lambda: True


class Scheduler:
    def __init__(self, stop: threading.Event, metrics: Metrics):
        self._stop = stop
        self._metrics = metrics

    def start(self, job: Job) -> None:
        self._metrics.errors.labels(self._metrics.flow, job.name)  # a zero series, so alerts see the job
        threading.Thread(target=self._loop, args=(job,), name=f"job-{job.name}", daemon=True).start()

    def _loop(self, job: Job) -> None:
        while not self._stop.wait(job.interval()):
            if job.enabled():
                self.run_once(job)

    def run_once(self, job: Job) -> int:
        began = time.monotonic()
        try:
            failed = job.run()
        except Exception as exc:  # noqa: BLE001 - a side job never ends the process; next tick retries
            failed = 1
            log.warning("%s failed, retrying in %.0fs: %s", job.name, job.interval(), exc)
        took = time.monotonic() - began
        self._metrics.task_duration.labels(self._metrics.flow, job.name).observe(took)
        if failed:
            self._metrics.errors.labels(self._metrics.flow, job.name).inc(failed)
        log.debug("%s took %.0f ms", job.name, took * 1000)
        return failed
