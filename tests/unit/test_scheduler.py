import threading

from mirrord.metrics import Metrics
from mirrord.supervisor.scheduler import Job, Scheduler


def _value(metrics: Metrics, name: str, **labels) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_a_failing_run_is_counted_and_the_job_runs_again():
    metrics, stop, runs = Metrics("f"), threading.Event(), []

    def work() -> int:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("cluster does not answer")
        if len(runs) == 3:
            stop.set()
        return 2

    Scheduler(stop, metrics).start(Job("checkpoints", lambda: 0.01, work))
    assert stop.wait(10)
    assert len(runs) == 3
    assert _value(metrics, "mirrord_errors_total", flow="f", kind="checkpoints") == 1 + 2 + 2
    assert _value(metrics, "mirrord_task_duration_seconds_count", flow="f", task="checkpoints") == 3


def test_a_disabled_job_does_not_run_and_its_error_series_exists():
    metrics, stop, runs = Metrics("f"), threading.Event(), []
    ticks = threading.Semaphore(0)

    def interval() -> float:
        ticks.release()
        return 0.01

    Scheduler(stop, metrics).start(Job("acls", interval, lambda: runs.append(1) or 0, lambda: False))
    for _ in range(5):
        assert ticks.acquire(timeout=10)
    stop.set()
    assert runs == []
    assert metrics.registry.get_sample_value("mirrord_errors_total", {"flow": "f", "kind": "acls"}) == 0.0
