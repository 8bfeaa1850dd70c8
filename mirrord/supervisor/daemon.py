"""The long-running process, a supervisor: signals, systemd notifications, health, reloads, leadership.

The main thread turns every half second: it starts the streaming query (running.Mirroring) once both
clusters answer (health.ClusterWatch) and this host holds the flow (leader.Election; a host that lost it
while mirroring fences its JVM: leader.Lease), notices a failed query and decides what its failure
means (restart after an outage or a deleted record, stop otherwise), pings the systemd watchdog while
mirrord itself is healthy, and acts on signals (SIGTERM/SIGINT stop, SIGHUP reloads). Records never
pass here: they run in Spark; every half second the interceptors' acknowledged positions move the
positions (positions.Positions), and each batch's end moves them too, from Spark's listener thread.
Periodic side jobs (topics, configs, groups, checkpoints, heartbeats, ACLs) run in the scheduler,
each in a module of its own.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable

from mirrord.acks import Acknowledgements
from mirrord.errors import EX_TEMPFAIL, ConfigError, Fenced, MirrordError
from mirrord.fencing import Election, Lease
from mirrord.kafka import admin
from mirrord.metrics import Metrics
from mirrord.mm2 import acls, checkpoints, heartbeats, topic_configs
from mirrord.positions import Positions
from mirrord.settings.config import Settings
from mirrord.settings.flow import Flow
from mirrord.spark import modes
from mirrord.spark.pipeline import check_transforms
from mirrord.spark.session import (
    add_progress_listener,
    jvm_exit_status,
    one_line,
    spark_session,
    spark_version,
    wait_jvm_exit,
)
from mirrord.supervisor import reload
from mirrord.supervisor.health import ClusterWatch
from mirrord.supervisor.notify import Notifier
from mirrord.supervisor.running import Mirroring
from mirrord.supervisor.scheduler import Job, Scheduler
from mirrord.supervisor.status import status_line

log = logging.getLogger("mirrord")
STATUS_EVERY = 10.0
RESTART_BACKOFF = 5.0
START_ATTEMPTS = 5  # failed starts while both clusters answer before mirrord gives up (and systemd restarts it)
STANDBY_AFTER = 5.0  # no assignment this long after joining the election: another host has it
OUTAGE_MEMORY = 600.0  # a query that fails within this of an outage failed because of it
TOPICS_EVERY = 1.0  # new source topics get their target copy within this (their records wait in the producer)


class Daemon:
    def __init__(self, load_settings: Callable[[], Settings], notifier: Notifier):
        self.load_settings = load_settings
        self.notifier = notifier
        self.settings = load_settings()
        self.flow = Flow.from_settings(self.settings)
        self.metrics = Metrics(self.settings.flow, spark_version())
        self._heartbeats = heartbeats.Heartbeats(self.metrics)
        self._seen_configs = topic_configs.SeenConfigs(self.settings.state_dir / "topic-configs.json")
        self._stop = threading.Event()
        self._reload = threading.Event()
        self._stall_reported = False
        self._next_ping = 0.0
        self._ready_sent = False
        self._started = False
        self._retry_at = 0.0
        self._start_failures = 0

    # -- lifecycle -------------------------------------------------------------------------
    def _take_signals(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self._stop.set())
        signal.signal(signal.SIGHUP, lambda *_: self._reload.set())

    def run(self) -> int:
        self._take_signals()
        s = self.settings
        self.metrics.serve(s.metrics_listen, str(s.config_file or "command line"))
        self._enter_work_dir()
        self.source = admin.Cluster("source", self.flow.source_admin)
        self.target = admin.Cluster("target", self.flow.target_admin)
        self.election = Election(s, self.target)
        self.positions = Positions(self.source, s.group_id, self.metrics, self.election.active)
        self.translation = checkpoints.GroupTranslation(self.source, self.target, self.flow.offset_syncs_topic,
                                                        checkpoints.checkpoints_topic(s.source_alias, s.separator))
        self.clusters = ClusterWatch([self.source, self.target], self.metrics, self._stop)
        self.clusters.start()
        self.master = s.spark_master or f"local[{self._local_slots()}]"
        log.info("starting Spark (%s)", self.master)
        self.spark = spark_session(s, self.master)
        self._take_signals()  # again: pyspark's SparkContext makes SIGINT cancel every job and raise
        lease = Lease(self.spark, s.leader_session_timeout_ms // 2) if s.leader_election else None
        check_transforms(self.spark, self.flow)
        self.acks = Acknowledgements(self.spark, self.positions, self.metrics, lambda: self.flow.policy.target_prefix,
                                     lambda: self.mirroring.running, lambda: self.mirroring.topics(),
                                     lambda: self.clusters.is_up("source"))
        self.mirroring = Mirroring(self.spark, self.flow, self.master, self.source, self.target, self.positions,
                                   self.acks, self.metrics, self.clusters, self.translation, lease)
        add_progress_listener(self.spark, self.mirroring.on_progress)
        self.acks.start(self._stop)
        jobs = Scheduler(self._stop, self.metrics)

        def up() -> bool:  # the side jobs run on the flow's active host only, while both clusters answer
            return self.clusters.all_up() and self.election.active()
        jobs.start(Job("topics", lambda: TOPICS_EVERY,
                       lambda: self.mirroring.ensure_target_topics(self.mirroring.topics()),
                       lambda: up() and self.mirroring.running))
        jobs.start(Job("configs", lambda: self.settings.sync_topic_configs_interval,
                       lambda: topic_configs.sync(self.source, self.target, self.mirroring.topics(),
                                                  self.flow.policy, self._seen_configs),
                       lambda: up() and self.settings.sync_topic_configs))
        jobs.start(Job("groups", lambda: self.settings.sync_group_offsets_interval, self._sync_groups,
                       lambda: up() and self.settings.sync_group_offsets and self.translation.ready))
        jobs.start(Job("heartbeats", lambda: self.settings.emit_heartbeats_interval,
                       lambda: self._heartbeats.run(self.source, self.target, self.settings.source_alias,
                                                    self.settings.target_alias, self.flow.policy),
                       lambda: up() and self.settings.emit_heartbeats))
        jobs.start(Job("acls", lambda: self.settings.sync_topic_acls_interval,
                       lambda: acls.sync(self.source, self.target, self.flow.policy, self.settings.whitelist),
                       lambda: up() and self.settings.sync_topic_acls))
        jobs.start(Job("checkpoints", lambda: self.settings.emit_checkpoints_interval, self._emit_checkpoints,
                       lambda: up() and self.settings.emit_checkpoints and self.translation.ready))
        return self._supervise()

    def _local_slots(self) -> int:
        """mirrord's own `local[N]`: a slot per stream of the source and the spare real-time mode needs."""
        return modes.local_slots(modes.default_streams(self.settings.num_streams, os.cpu_count() or 1))

    def _enter_work_dir(self) -> None:
        """Spark 4.0 writes `artifacts/` into the working directory (SPARK-52396): make that the state
        dir, and clear what a killed predecessor left there."""
        work = self.settings.state_dir / "spark"
        shutil.rmtree(work / "artifacts", ignore_errors=True)
        work.mkdir(parents=True, exist_ok=True)
        os.chdir(work)

    def _supervise(self) -> int:
        next_status = 0.0
        while True:
            if self._stop.is_set():
                return self._shutdown()
            if self._reload.is_set():
                self._reload.clear()
                self._do_reload()
            self._check_jvm()
            now = time.monotonic()
            if not self.mirroring.running:
                self._try_start(now)
            else:
                self._check_query(now)
            healthy = self._healthy(now)
            mirroring = healthy and self.mirroring.running and self.clusters.all_up()
            self.metrics.active.labels(self.settings.flow).set(1 if self.election.active() else 0)
            self.metrics.up.labels(self.settings.flow).set(1 if mirroring else 0)
            if healthy:
                self._ping_watchdog()
            if now >= next_status:
                line = self._status_line()
                if next_status:
                    log.info("%s", line)
                self.notifier.status(line)
                next_status = now + STATUS_EVERY
            self._stop.wait(0.5 if self.notifier.watchdog_interval is None else
                            min(0.5, self.notifier.watchdog_interval / 2))

    def _try_start(self, now: float) -> None:
        """(Re)start the query once both clusters answer. READY=1 comes with the first start, or at
        once while a cluster is away at start-up: waiting for it is mirrord's normal work, and systemd's
        start timeout must not turn an outage into a restart loop."""
        if not self.clusters.all_up():
            if not self._ready_sent:
                log.warning("waiting: %s", "; ".join(self.clusters.away()))
                self._send_ready()
            return
        if now < self._retry_at:
            return
        if not self._elected():
            return
        try:
            self.mirroring.start()
        except (ConfigError, Fenced):
            raise
        except Exception as exc:  # noqa: BLE001 - a cluster that went away meanwhile: the next round retries
            self._start_failures += 1
            self.metrics.error("query")
            if self._start_failures >= START_ATTEMPTS and self.clusters.up_for() > START_ATTEMPTS * RESTART_BACKOFF:
                raise MirrordError(f"cannot start the streaming query: {one_line(str(exc))}") from None
            log.warning("cannot start the streaming query, retrying in %.0fs: %s", RESTART_BACKOFF,
                        one_line(str(exc)))
            self._retry_at = now + RESTART_BACKOFF
            return
        self._start_failures = 0
        if not self._started:
            self._started = True
            s = self.settings
            log.info("mirroring %s -> %s, topics matching %r%s, %s", self.source.bootstrap, self.target.bootstrap,
                     s.whitelist, f" but not {s.topics_exclude!r}" if s.topics_exclude else "", self.master)
            for t in s.transforms:
                log.info("transform %s on topics matching %r", t.name, t.topics)
        if not self._ready_sent:
            self._send_ready()

    def _elected(self) -> bool:
        """Whether this host may mirror: leader election off, or this host won it. A standby is READY,
        and says so in STATUS and `mirrord_active`."""
        try:
            if self.election.elected(self.flow.target_admin):
                return True
        except MirrordError as exc:
            log.warning("%s; retrying in %.0fs", exc, RESTART_BACKOFF)
            self._retry_at = time.monotonic() + RESTART_BACKOFF
            return False
        if not self._ready_sent and time.monotonic() - self.election.joined_at > STANDBY_AFTER:
            log.info("standing by: another host mirrors flow %s (group %s)", self.settings.flow,
                     self.election.leadership.group)
            self._send_ready()
        return False

    def _send_ready(self) -> None:
        self._ready_sent = True
        self.notifier.ready(self._status_line())

    def _check_query(self, now: float) -> None:
        if not self.election.active():
            # An outage is a state, not a hand-over: the batch waits, the lease is kept, the session rejoined
            # when the target answers.
            if self.election.handed_over(self.clusters.is_up("target")):
                self.mirroring.lease.fence()
                raise Fenced("lost the flow's election while mirroring: fenced; restart as a standby")
            return
        failed = self.mirroring.failure()
        if failed is None:
            return
        kind, why = failed
        self.mirroring.forget()
        self.metrics.error(kind)
        if kind == "deleted":  # the next start resumes past them, and reports them lost
            log.warning("the source deleted records before mirrord read them; restarting past them: %s", why)
            self._retry_at = now
            return
        if self.clusters.down_within(OUTAGE_MEMORY) or not self.clusters.all_up():
            log.warning("the streaming query stopped while a cluster was unreachable; it restarts from its "
                        "checkpoint when both answer: %s", why)
        elif self.settings.abort_on_send_failure or kind != "delivery":
            raise MirrordError(f"streaming query failed: {why}")
        else:
            log.error("batch failed, retrying from the last committed batch in %.0fs: %s", RESTART_BACKOFF, why)
        self._retry_at = now + RESTART_BACKOFF

    def _check_jvm(self) -> None:
        """Spark's JVM is a process of its own: its exit ends mirrord (systemd restarts it)."""
        status = jvm_exit_status()
        if status == EX_TEMPFAIL:
            raise Fenced("this host's lease lapsed while its supervisor was not answering: Spark's JVM fenced "
                         "itself; restart as a standby")
        if status is not None:
            raise MirrordError(f"Spark's JVM exited with status {status}")

    def _ping_watchdog(self) -> None:
        interval = self.notifier.watchdog_interval
        now = time.monotonic()
        if interval is not None and now >= self._next_ping:
            self.notifier.watchdog()
            self._next_ping = now + interval

    def _healthy(self, now: float) -> bool:
        """The JVM answers, and no batch is overdue by stall.timeout.ms while both clusters answered: a
        batch waiting for an unreachable cluster is not stuck."""
        try:
            query = self.mirroring.query
            if query is None:
                self.spark._jvm.java.lang.System.nanoTime()  # JVM alive, between queries
                return True
            running = min(query.running_for(now), self.clusters.up_for())
        except Exception as exc:  # noqa: BLE001 - a dead JVM raises py4j errors of several kinds
            self._check_jvm()
            log.warning("Spark does not answer: %s", one_line(str(exc)))
            return False
        stalled = running > self.settings.stall_timeout_ms / 1e3
        if stalled and not self._stall_reported:
            log.warning("batch overdue by %.0fs while both clusters answer (stall.timeout.ms=%d): withholding "
                        "the watchdog", running, self.settings.stall_timeout_ms)
        self._stall_reported = stalled
        return not stalled

    def _do_reload(self) -> None:
        """Apply a changed configuration (reload.prepare decides what it may change) without copying
        anything twice; a refused one leaves the running configuration as it was."""
        self.notifier.reloading()
        try:
            change = reload.prepare(self.settings, self.flow, self.load_settings, self.clusters.away(),
                                    lambda flow: check_transforms(self.spark, flow))
        except MirrordError as exc:
            self.metrics.error("reload")
            log.error("reload refused, keeping the running configuration: %s", exc)
            self.notifier.ready(self._status_line())
            return
        if change.restart:
            self.mirroring.stop(self._ping_watchdog)
        self.settings, self.flow = change.settings, change.flow
        self.election.settings = change.settings
        self.mirroring.flow = change.flow
        if change.restart:
            self._retry_at = 0.0
            self._try_start(time.monotonic())
        log.info("reloaded: topics matching %r%s", change.settings.whitelist,
                 "" if change.restart else " (query unchanged)")
        self.notifier.ready(self._status_line())

    def _shutdown(self) -> int:
        self.notifier.stopping()
        mode = self.mirroring.mode
        log.info("stopping: %s", "finishing the current batch" if mode is None or not mode.real_time
                 else "waiting for the target to acknowledge what was sent")
        self.mirroring.stop(self._ping_watchdog)
        self.election.close()
        try:
            self.spark.stop()
        except Exception as exc:  # noqa: BLE001 - the JVM may already be gone; nothing left to save
            log.warning("Spark did not stop cleanly: %s", one_line(str(exc)))
        wait_jvm_exit()
        log.info("stopped after mirroring %d records in %d batches", self.positions.mirrored, self.positions.batches)
        return 0

    def _sync_groups(self) -> int:
        """Source groups' offsets, translated, into the target's groups (sync.group.offsets.enabled)."""
        s = self.settings
        return self.translation.sync_group_offsets(self.mirroring.topics(), self.flow.policy, s.groups,
                                                   s.groups_exclude, s.group_id)

    def _emit_checkpoints(self) -> int:
        """Source groups' offsets, translated, into the checkpoints topic on the target."""
        s = self.settings
        self.translation.emit_checkpoints(self.mirroring.topics(), self.flow.policy, s.groups, s.groups_exclude,
                                          s.group_id)
        self.metrics.last_checkpoint.labels(s.flow).set(time.time())
        return 0

    # -- status ----------------------------------------------------------------------------
    def _status_line(self) -> str:
        standby = None if self.election.active() else self.settings.flow
        return status_line(self.positions, self.acks.rate, self.mirroring.mode, self.clusters.away(), standby)
