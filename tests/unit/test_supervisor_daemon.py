"""The Daemon carries out what the state machine decides (docs/decisions.md §11), here against a world of
fakes: no brokers, no Spark. Each test runs the real supervisor loop, turn after turn, until it stops."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import SimpleNamespace

import pytest

from mirrord.errors import Fenced, MirrordError
from mirrord.metrics import Metrics
from mirrord.supervisor import daemon as daemon_module
from mirrord.supervisor import states
from mirrord.supervisor.daemon import Daemon
from mirrord.supervisor.states import Machine, Phase
from mirrord.supervisor.wake import Wake
from mirrord.supervisor.watchdog import Watchdog

AWAY = "target cluster (b:9092) unreachable since 10:42:17 (3s)"


class Notifier:
    watchdog_interval = 0.002  # turns of a millisecond

    def __init__(self):
        self.sent: list[str] = []

    def ready(self, status):
        self.sent.append(f"READY {status}")

    def status(self, status):
        self.sent.append(f"STATUS {status}")

    def watchdog(self):
        pass

    def reloading(self):
        self.sent.append("RELOADING")

    def stopping(self):
        self.sent.append("STOPPING")


class World:
    """The clusters, the election and the query as the Daemon sees them; `script(world, turn)` changes them
    at every turn (the Daemon asks the query how overdue it is once a turn)."""

    def __init__(self, script):
        self.script = script
        self.turn = 0
        self.away: list[str] = []
        self.active = True  # the election's partition is this host's
        self.elected = True
        self.elsewhere = False  # another host holds the flow
        self.start_error: Exception | None = None
        self.failure: tuple[str, str] | None = None
        self.running = False
        self.calls: list[str] = []
        self.closed = False

    def call(self, name: str, result=None):
        self.calls.append(name)
        return result


def daemon(world: World, **settings) -> Daemon:
    d = Daemon.__new__(Daemon)  # everything __init__ and run() make, made here of fakes
    d.notifier = Notifier()
    d.settings = SimpleNamespace(**{"flow": "f", "abort_on_send_failure": False, "stall_timeout_ms": 60_000,
                                    "whitelist": "t.*", "topics_exclude": "", "transforms": (),
                                    "delivery": "at-least-once", **settings})
    d.flow = SimpleNamespace(target_admin={}, settings=d.settings)
    d.metrics = Metrics("f")
    d.machine = Machine(d.metrics)
    d.watchdog = Watchdog(d.notifier)
    d._stop, d._reload, d._wake, d._now = threading.Event(), False, Wake(), 0.0
    d.clusters = SimpleNamespace(away=lambda: list(world.away), all_up=lambda: not world.away,
                                 answering_since=lambda name: 0.0,
                                 is_up=lambda name: not world.away, up_for=lambda: 0.0 if world.away else 1e6,
                                 down_within=lambda seconds: False)
    d.election = SimpleNamespace(active=lambda: world.active, joined_at=0.0,
                                 waiting=lambda since, patience: (0.0, patience),
                                 elected=lambda admin: world.call("elected", world.elected),
                                 handed_over=lambda target_up: world.call("handed_over", world.elsewhere),
                                 leadership=SimpleNamespace(group="f.leader"),
                                 standby_reason=lambda: "another host mirrors flow f (group f.leader)")
    d.mirroring = Mirroring(world)

    def close(keep_alive):
        d.mirroring.stop(keep_alive)
        world.closed = True
    d.parts = SimpleNamespace(source=SimpleNamespace(bootstrap="a:9092"), target=SimpleNamespace(bootstrap="b:9092"),
                              positions=SimpleNamespace(mirrored=0, batches=0, lag=0, topics=1, lost=0),
                              acks=SimpleNamespace(rate=0.0), mirroring=d.mirroring, election=d.election, close=close)
    return d


class Mirroring:
    mode = None
    master = "local[3]"

    def __init__(self, world: World):
        self.world = world
        self.lease = SimpleNamespace(fence=lambda: world.call("fence"), quarantined_for=lambda: 0.0)

    @property
    def running(self) -> bool:
        return self.world.running

    def start(self) -> None:
        self.world.call("start")
        if self.world.start_error is not None:
            raise self.world.start_error
        self.world.running = True

    def failure(self):
        return self.world.failure if self.world.running else None

    def forget(self) -> None:
        self.world.running = self.world.call("forget", False)

    def stop(self, keep_alive) -> None:
        self.world.running = self.world.call("stop", False)

    def overdue(self, now: float) -> float | None:
        self.world.turn += 1
        self.world.script(self.world, self.world.turn)
        return 0.0 if self.world.running else None


@pytest.fixture(autouse=True)
def no_jvm(monkeypatch):
    monkeypatch.setattr(daemon_module, "jvm_exit_status", lambda: None)
    monkeypatch.setattr(states, "RESTART_BACKOFF", 0.01)
    monkeypatch.setattr(states, "QUICK_RESTART", 0.01)


def supervise(d: Daemon) -> int:
    result: dict = {}

    def go():
        try:
            result["status"] = d._supervise()
        except Exception as exc:  # noqa: BLE001 - handed to the test
            result["error"] = exc
    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the supervisor did not stop"
    if "error" in result:
        raise result["error"]
    return result["status"]


def test_waiting_for_the_target_at_start_up_then_mirroring_then_stopping(caplog):
    caplog.set_level(logging.INFO, logger="mirrord")
    def script(world, turn):
        world.away = [AWAY] if turn < 5 else []
        if turn == 10:
            d._stop.set()
    world = World(script)
    world.away = [AWAY]
    d = daemon(world)
    assert supervise(d) == 0
    ready = [line for line in d.notifier.sent if line.startswith("READY")]
    assert len(ready) == 1 and ready[0].startswith(f"READY waiting: {AWAY}; ") and ready[0].endswith("; state waiting")
    assert world.calls[:2] == ["elected", "start"] and world.closed
    assert d.notifier.sent[-1] == "STOPPING"
    assert "mirroring a:9092 -> b:9092, topics matching 't.*', local[3]" in caplog.text
    assert d.machine.phase is Phase.STOPPING
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("state ")] == [
        "state starting -> waiting", "state waiting -> starting", "state starting -> mirroring",
        "state mirroring -> stopping"]


def test_a_start_that_keeps_failing_while_both_clusters_answer_ends_the_daemon():
    world = World(lambda world, turn: None)
    world.start_error = RuntimeError("Timed out waiting for a node assignment")
    d = daemon(world)
    with pytest.raises(MirrordError, match="^cannot start the streaming query: Timed out waiting for a node"):
        supervise(d)
    assert world.calls.count("start") == states.START_ATTEMPTS
    assert d.metrics.registry.get_sample_value("mirrord_errors_total", {"flow": "f", "kind": "query"}) == 5
    assert d.metrics.registry.get_sample_value("mirrord_state", {"flow": "f", "state": "failed"}) == 1


def test_a_hand_over_while_mirroring_fences_and_exits_75():
    def script(world, turn):
        world.active = turn < 3
        world.elsewhere = turn >= 6
    world = World(script)
    with pytest.raises(Fenced, match="^lost the flow's election while mirroring: fenced; restart as a standby$") as exc:
        supervise(daemon(world))
    assert exc.value.exit_status == 75
    assert world.calls[-2:] == ["handed_over", "fence"]


def test_a_delivery_failure_restarts_the_query_and_abort_on_send_failure_ends_the_daemon():
    def script(world, turn):
        if turn == 3:
            world.failure = ("delivery", "RecordTooLargeException: 2000000 bytes")
        if turn == 4:
            world.failure = None
        if turn == 20:
            d._stop.set()
    world = World(script)
    d = daemon(world)
    assert supervise(d) == 0
    assert world.calls.count("start") == 2 and "forget" in world.calls
    world = World(script)
    d = daemon(world, abort_on_send_failure=True)
    with pytest.raises(MirrordError, match="^streaming query failed: RecordTooLargeException: 2000000 bytes"):
        supervise(d)


def test_a_jvm_that_fenced_itself_ends_the_daemon_with_75(monkeypatch):
    monkeypatch.setattr(daemon_module, "jvm_exit_status", lambda: 75)
    with pytest.raises(Fenced, match="Spark's JVM fenced itself"):
        supervise(daemon(World(lambda world, turn: None)))



def test_a_signal_at_any_line_of_the_turn_never_hangs_the_supervisor():
    """CI once saw mirrord hang at SIGTERM: Python ran the handler while the main thread held the lock of the
    event it waited on, and the handler's set() waited for that lock for ever. Here the real handlers run at
    every line the main thread runs in the turn and its wait, as a signal may land there; the loop must go on
    to its stop. (An alarm ends the test if a handler waits: lock waits are interrupted by signals.)"""
    world = World(lambda world, turn: d._stop.set() if turn == 30 else None)
    d = daemon(world)
    d._do_reload = lambda: world.call("reload")
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM)}

    def hung(*_):
        raise TimeoutError("a signal handler waited for a lock its own thread held")

    def ring(frame, event, arg):
        if event == "line" and frame.f_code.co_filename.endswith(("threading.py", "wake.py", "daemon.py")):
            handler(signal.SIGHUP, frame)
        return ring
    try:
        d._take_signals()
        handler = signal.getsignal(signal.SIGHUP)
        signal.signal(signal.SIGALRM, hung)
        signal.alarm(20)
        sys.settrace(ring)
        try:
            assert d._supervise() == 0
        finally:
            sys.settrace(None)
    finally:
        signal.alarm(0)
        for sig, handler in kept.items():
            signal.signal(sig, handler)
    assert world.calls.count("reload") >= 20 and d.notifier.sent[-1] == "STOPPING"
