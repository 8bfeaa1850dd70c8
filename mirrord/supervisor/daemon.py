"""The long-running process, a supervisor: it observes, the state machine decides (states.py), it acts.

The main thread turns every half second. It observes the signals (SIGTERM/SIGINT stop, SIGHUP reloads),
Spark's JVM, the clusters (health.ClusterWatch) and the flow's election (fencing.Election), hands each
observation to states.Machine, and carries out the actions that come back: ask the election, start the
streaming query (running.Mirroring), ask how it failed, fence, reload, send READY, shut down; an answer
goes back to the machine in turn. Then it pings the systemd watchdog while mirrord itself is healthy
(watchdog.Watchdog) and writes STATUS. Records never pass here: they run in Spark, and what the target
acknowledged comes from the JVM every half second (acks.Acknowledgements). Periodic side jobs
(topics, configs, groups, checkpoints, heartbeats, ACLs) run in the scheduler (jobs.py).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from functools import partial

from mirrord.errors import MirrordError
from mirrord.metrics import Metrics
from mirrord.settings.config import Settings
from mirrord.settings.flow import Flow
from mirrord.settings.keys import EXACTLY_ONCE
from mirrord.spark.pipeline import check_transforms
from mirrord.spark.session import jvm_exit_status, one_line, spark_version
from mirrord.supervisor import reload
from mirrord.supervisor.notify import Notifier
from mirrord.supervisor.parts import Parts, build
from mirrord.supervisor.states import (
    OUTAGE_MEMORY,
    STANDBY_AFTER,
    Action,
    CountError,
    Do,
    Elected,
    Exit,
    HandOver,
    JvmExited,
    Log,
    Machine,
    Observation,
    Phase,
    QueryFailed,
    Reload,
    Restart,
    Started,
    StartFailed,
    Stop,
    Turn,
)
from mirrord.supervisor.status import status_line
from mirrord.supervisor.wake import Wake
from mirrord.supervisor.watchdog import Watchdog

log = logging.getLogger("mirrord")
STATUS_EVERY = 10.0


class Daemon:
    def __init__(self, load_settings: Callable[[], Settings], notifier: Notifier):
        self.load_settings = load_settings
        self.notifier = notifier
        self.settings = load_settings()  # the running configuration and its flow: a reload replaces both
        self.flow = Flow.from_settings(self.settings)
        self.metrics = Metrics(self.settings.flow, spark_version())
        self.machine = Machine(self.metrics)
        self.watchdog = Watchdog(notifier)
        self._stop = threading.Event()  # other threads wait on it; a handler's set() never waits on this thread
        self._reload = False  # a plain flag: a signal handler must take no lock this thread may hold (wake.py)
        self._wake = Wake()  # a turn now: a signal, the election confirmed this host, a cluster came or went
        self._now = 0.0  # the turn's clock, which the answers to its questions carry

    def _take_signals(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: (self._stop.set(), self._wake.set()))
        signal.signal(signal.SIGHUP, lambda *_: (setattr(self, "_reload", True), self._wake.set()))

    def run(self) -> int:
        self._take_signals()
        self.metrics.serve(self.settings.metrics_listen, str(self.settings.config_file or "command line"))
        # again once Spark has started: pyspark's SparkContext makes SIGINT cancel every job and raise
        p = self.parts = build(self.flow, self.metrics, self._stop, spark_started=self._take_signals)
        self.mirroring, self.election, self.clusters = p.mirroring, p.election, p.clusters
        self.election.on_change = self.clusters.on_change = self._wake.set
        return self._supervise()

    def _supervise(self) -> int:
        next_status = 0.0
        while True:
            if self._stop.is_set():
                self._handle(Stop())
                return 0
            if self._reload:
                self._reload = False
                self._handle(Reload())
            jvm_exit = jvm_exit_status()
            self._now = now = time.monotonic()
            self._handle(Turn(now, tuple(self.clusters.away()), self.election.active(), jvm_exit))
            healthy = self._healthy(now)
            self.metrics.active.labels(self.settings.flow).set(1 if self.election.active() else 0)
            mirroring = healthy and self.mirroring.running and self.clusters.all_up()
            self.metrics.up.labels(self.settings.flow).set(1 if mirroring else 0)
            if healthy:
                self.watchdog.ping()
            if now >= next_status:
                line = self._status_line()
                if next_status:
                    log.info("%s", line)
                self.notifier.status(line)
                next_status = now + STATUS_EVERY
            self._wake.wait(self.watchdog.turn)

    def _handle(self, seen: Observation) -> None:
        """One observation through the state machine; its actions carried out in order, answers handled in turn."""
        for action in self.machine.handle(seen):
            answer = self._do(action)
            if answer is not None:
                self._handle(answer)

    def _do(self, action: Action):
        match action:
            case Log(level=level, text=text):
                log.log(level, "%s", text)
            case CountError(kind=kind):
                self.metrics.error(kind)
            case Exit(error=error):
                raise error from None
            case Do.READY:
                self.notifier.ready(self._status_line())
            case Do.ANNOUNCE | Do.STANDING_BY:
                announce(action, self.settings, self.parts)
            case Do.REHEARSE:
                self.mirroring.rehearse()
            case Do.ASK_ELECTION:
                try:
                    elected = self.election.elected(self.flow.target_admin)
                except MirrordError as exc:
                    return Elected(time.monotonic(), False, error=str(exc))
                since, patience = self.election.waiting(self.clusters.answering_since("target"), STANDBY_AFTER)
                return Elected(time.monotonic(), elected, since, patience=patience)
            case Do.START:
                try:
                    self.mirroring.start()
                except Exception as exc:  # noqa: BLE001 - the machine judges it: a cluster gone meanwhile is retried
                    return StartFailed(self._now, exc, one_line(str(exc)), self.clusters.up_for())
                return Started()
            case Do.ASK_HAND_OVER:
                return HandOver(self.election.handed_over(self.clusters.is_up("target")))
            case Do.ASK_FAILURE:
                failed = self.mirroring.failure()
                return None if failed is None else QueryFailed(
                    self._now, *failed, away=not self.clusters.all_up(),
                    recent_outage=self.clusters.down_within(OUTAGE_MEMORY),
                    abort_on_send_failure=self.settings.abort_on_send_failure,
                    quarantined_for=self._quarantined_for())
            case Do.FORGET:
                self.mirroring.forget()
            case Do.FENCE:
                self.mirroring.lease.fence()
            case Do.RELOAD:
                self._do_reload()
            case Do.SHUTDOWN:
                self._shutdown()
        return None

    def _quarantined_for(self) -> float:
        lease = self.mirroring.lease
        return 0.0 if lease is None else lease.quarantined_for()

    def _healthy(self, now: float) -> bool:
        """The JVM answers, and no batch is overdue by stall.timeout.ms while both clusters answered."""
        try:
            overdue = self.mirroring.overdue(now)
        except Exception as exc:  # noqa: BLE001 - a dead JVM raises py4j errors of several kinds
            self._handle(JvmExited(jvm_exit_status()))
            log.warning("Spark does not answer: %s", one_line(str(exc)))
            return False
        return not self.watchdog.stalled(overdue, self.settings.stall_timeout_ms)

    def _do_reload(self) -> None:
        """Apply a changed configuration (reload.prepare decides what it may change) without copying
        anything twice; a refused one leaves the running configuration as it was."""
        self.notifier.reloading()
        try:
            change = reload.prepare(self.settings, self.flow, self.load_settings, self.clusters.away(),
                                    partial(check_transforms, self.parts.spark))
        except MirrordError as exc:
            self.metrics.error("reload")
            log.error("reload refused, keeping the running configuration: %s", exc)
            self.notifier.ready(self._status_line())
            return
        if change.restart:
            self.mirroring.stop(self.watchdog.ping)
        self.settings, self.flow = change.settings, change.flow
        self.mirroring.flow = change.flow
        self.election.settings = change.settings
        if change.restart:
            self._now = time.monotonic()
            self._handle(Restart(self._now, tuple(self.clusters.away())))
        log.info("reloaded: topics matching %r%s", change.settings.whitelist,
                 "" if change.restart else " (query unchanged)")
        self.notifier.ready(self._status_line())

    def _shutdown(self) -> None:
        self.notifier.stopping()
        mode = self.mirroring.mode
        log.info("stopping: %s", "finishing the current batch" if mode is None or not mode.real_time
                 else "waiting for the target to acknowledge what was sent")
        self.parts.close(self.watchdog.ping)
        log.info("stopped after mirroring %d records in %d batches", self.parts.positions.mirrored,
                 self.parts.positions.batches)

    def _status_line(self) -> str:
        standby = self.election.standby_reason() if self.machine.phase is Phase.STANDBY else None
        return status_line(self.parts.positions, self.parts.acks.rate, self.mirroring.mode, self.clusters.away(),
                           standby, self.machine.phase.value, self.settings.delivery == EXACTLY_ONCE)


def announce(what: Do, settings: Settings, parts: Parts) -> None:
    """The lines that say what this host does: stand by, or (the first start) mirror what, where."""
    s = settings
    if what is Do.STANDING_BY:
        log.info("standing by: %s", parts.election.standby_reason())
        return
    log.info("mirroring %s -> %s, topics matching %r%s, %s%s", parts.source.bootstrap, parts.target.bootstrap,
             s.whitelist, f" but not {s.topics_exclude!r}" if s.topics_exclude else "", parts.mirroring.master,
             ", exactly once (Kafka transactions on the target)" if s.delivery == EXACTLY_ONCE else "")
    for t in s.transforms:
        log.info("transform %s on topics matching %r", t.name, t.topics)
