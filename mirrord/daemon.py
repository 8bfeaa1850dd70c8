"""The long-running process, a supervisor: signals, systemd notifications, health, reloads, leadership.

The main thread turns every half second: it starts the streaming query (query.Query) once both
clusters answer (health.ClusterWatch) and this host holds the flow (leader.Election), notices a
failed query and restarts it when the failure came with an outage, pings the systemd watchdog while
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

from mirrord import acls, admin, checkpoints, heartbeats, modes, reload, topic_configs
from mirrord.acks import Acknowledgements
from mirrord.config import Settings
from mirrord.errors import EX_TEMPFAIL, ConfigError, Fenced, MirrordError
from mirrord.flow import Flow
from mirrord.health import ClusterWatch
from mirrord.leader import Election, Lease
from mirrord.metrics import Metrics
from mirrord.notify import Notifier
from mirrord.pipeline import check_transforms
from mirrord.positions import Positions
from mirrord.query import Query, TargetTopics
from mirrord.scheduler import Job, Scheduler
from mirrord.spark import (
    add_progress_listener,
    default_parallelism,
    jvm_exit_status,
    one_line,
    spark_session,
    spark_version,
    wait_jvm_exit,
)
from mirrord.status import status_line

log = logging.getLogger("mirrord")
STATUS_EVERY = 10.0
STOP_GRACE = 60.0  # for the batch in flight to commit; TimeoutStopSec is 90
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
        self._requery = ""  # why the query must restart (its mode no longer fits), set by the topics job
        self._stall_reported = False
        self._next_ping = 0.0
        self._ready_sent = False
        self._started = False
        self._retry_at = 0.0
        self._start_failures = 0
        self.mode: modes.Mode | None = None
        self.query: Query | None = None
        self.lease: Lease | None = None

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
        self.lease = Lease(self.spark, s.leader_session_timeout_ms // 2, self._stop) if s.leader_election else None
        check_transforms(self.spark, self.flow)
        add_progress_listener(self.spark, self._on_progress)
        self.acks = Acknowledgements(self.spark, self.positions, self.metrics, lambda: self.flow.policy.target_prefix,
                                     lambda: self.query is not None, self._mirrored_topics,
                                     lambda: self.clusters.is_up("source"))
        self.acks.start(self._stop)
        jobs = Scheduler(self._stop, self.metrics)

        def up() -> bool:  # the side jobs run on the flow's active host only, while both clusters answer
            return self.clusters.all_up() and self.election.active()
        jobs.start(Job("topics", lambda: TOPICS_EVERY, lambda: self._target_topics(self._mirrored_topics()),
                       lambda: up() and self.query is not None))
        jobs.start(Job("configs", lambda: self.settings.sync_topic_configs_interval,
                       lambda: topic_configs.sync(self.source, self.target, self._mirrored_topics(),
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
        """mirrord's own `local[N]`: sized from the source's partitions for real-time mode (when the source
        answers now), else num.streams."""
        s = self.settings
        if s.trigger == modes.MICRO_BATCH:
            return s.num_streams
        try:
            partitions = sum(self.source.partitions(self.flow.pattern).values())
        except Exception as exc:  # noqa: BLE001 - an unreachable source: real-time mode waits for a restart
            log.warning("cannot count the source's partitions (%s): Spark gets local[%d]", one_line(str(exc)),
                        s.num_streams)
            return s.num_streams
        return modes.local_slots(partitions, s.num_streams)

    def _slots(self) -> int:
        return modes.master_slots(self.master, os.cpu_count() or 1) or default_parallelism(self.spark)

    def _enter_work_dir(self) -> None:
        """Spark 4.0 writes `artifacts/` into the working directory (SPARK-52396): make that the state
        dir, and clear what a killed predecessor left there."""
        work = self.settings.state_dir / "spark"
        shutil.rmtree(work / "artifacts", ignore_errors=True)
        work.mkdir(parents=True, exist_ok=True)
        os.chdir(work)

    def _start_query(self) -> None:
        self.translation.prepare()
        self.topics = TargetTopics(self.flow, self.source, self.target,
                                   lambda topic: self.metrics.config_refused.labels(self.settings.flow, topic).inc())
        topics = self._mirrored_topics()
        self._target_topics(topics)
        mode = modes.choose(self.settings.trigger, sum(topics.values()), self._slots())
        self._set_mode(mode)
        self.positions.seed(topics)
        self.acks.read(commit=True)  # what a failed query's producers delivered: the start resumes past it
        query = Query(self.spark, self.flow, mode, self.positions)
        try:
            where = query.start(self.source, topics)
        except Exception as exc:  # noqa: BLE001 - py4j wraps Spark's refusal
            refusal = one_line(str(exc))
            if not (mode.real_time and "STREAMING_REAL_TIME_MODE" in refusal):
                raise
            self._set_mode(modes.Mode(modes.MICRO_BATCH, f"Spark refused real-time mode: {refusal}"))
            query = Query(self.spark, self.flow, self.mode, self.positions)
            where = query.start(self.source, topics)
        self.positions.report_deleted(where.lost)
        self.query = query
        if self.lease is not None:
            self.lease.hold()
        self.metrics.up.labels(self.settings.flow).set(1)

    def _set_mode(self, mode: modes.Mode) -> None:
        if mode != self.mode:
            log.info("%s mode: %s", mode.name, mode.reason)
            self.mode = mode
            for name in (modes.REAL_TIME, modes.MICRO_BATCH):
                self.metrics.mode.labels(self.settings.flow, name).set(1 if name == mode.name else 0)

    def _stop_query(self, grace: float = STOP_GRACE) -> None:
        """Stop the query without copying anything twice when its batch (micro-batch) or its buffered records
        (real-time) are acknowledged within `grace`; while a cluster is away that may never happen, so it
        is cut at once (the records in flight are copied again: at least once)."""
        query, self.query = self.query, None
        if query is None:
            return
        self.metrics.up.labels(self.settings.flow).set(0)
        if not self.clusters.all_up():
            grace = 0.0
        outcome: dict[str, object] = {}

        def stop() -> None:
            try:
                outcome["clean"] = query.stop(grace)
            except Exception as exc:  # noqa: BLE001 - JVM already gone: nothing to finish; the checkpoint replays
                outcome["error"] = exc

        stopper = threading.Thread(target=stop, name="stop-query", daemon=True)
        stopper.start()
        while stopper.is_alive():
            self._ping_watchdog()  # waiting for the target's acknowledgements is not a stall
            stopper.join(0.2)
        if self.lease is not None:
            try:
                self.lease.release()
            except Exception as exc:  # noqa: BLE001 - the JVM is gone: nothing left to fence
                log.debug("cannot release the lease: %s", exc)
        if "error" in outcome:
            log.warning("streaming query did not stop cleanly: %s", one_line(str(outcome["error"])))
        elif outcome.get("clean"):
            log.info("streaming query stopped cleanly: nothing it sent will be copied again")
        else:
            log.warning("streaming query stopped with records unacknowledged (%s): they are copied again at the "
                        "next start", "a cluster is unreachable" if grace == 0 else
                        f"not acknowledged within {grace:.0f}s")

    def _supervise(self) -> int:
        next_status = 0.0
        while True:
            if self._stop.is_set():
                return self._shutdown()
            if self._reload.is_set():
                self._reload.clear()
                self._do_reload()
            if self._requery and self.query is not None:
                log.info("restarting the streaming query: %s", self._requery)
                self._stop_query()
            self._requery = ""
            self._check_jvm()
            now = time.monotonic()
            if self.query is None:
                self._try_start(now)
            else:
                self._check_query(now)
            healthy = self._healthy(now)
            mirroring = healthy and self.query is not None and self.clusters.all_up()
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
            self._start_query()
        except ConfigError:
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
            if not self._handed_over():  # an outage is a state, not a hand-over: the batch waits, the lease is
                return                   # kept, the session rejoined when the target answers
            log.error("this host lost the flow's election: fencing it (its JVM halts with whatever its producers "
                      "still buffered; the next active host resumes from the acknowledged offsets)")
            try:
                self.lease.revoke()
                wait_jvm_exit(5.0)
            except Exception as exc:  # noqa: BLE001 - the JVM halts while py4j talks to it
                log.debug("fencing: %s", exc)
            raise Fenced("lost the flow's election while mirroring: fenced; restart as a standby")
        failed = self._query_failure()
        if failed is None:
            return
        kind, why = failed
        self.query = None
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

    def _handed_over(self) -> bool:
        """Another host holds the flow now. While the target (where the election lives) is unreachable, or
        the group shows no other holder, this host's lapsed session is an outage's, and it rejoins."""
        if not self.clusters.is_up("target"):
            return False
        try:
            return self.election.handed_over()
        except Exception as exc:  # noqa: BLE001 - the target went away again: not a hand-over yet
            log.debug("cannot describe the election's group: %s", exc)
            return False

    def _ping_watchdog(self) -> None:
        interval = self.notifier.watchdog_interval
        now = time.monotonic()
        if interval is not None and now >= self._next_ping:
            self.notifier.watchdog()
            self._next_ping = now + interval

    def _query_failure(self) -> tuple[str, str] | None:
        if self.query is None:
            return None
        try:
            return self.query.failure()
        except Exception as exc:  # noqa: BLE001 - the JVM does not answer: the watchdog decides
            log.debug("cannot ask the query how it is: %s", exc)
            return None

    def _healthy(self, now: float) -> bool:
        """The JVM answers, and no batch is overdue by stall.timeout.ms while both clusters answered: a
        batch waiting for an unreachable cluster is not stuck."""
        try:
            if self.query is None:
                self.spark._jvm.java.lang.System.nanoTime()  # JVM alive, between queries
                return True
            running = min(self.query.running_for(now), self.clusters.up_for())
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
            self._stop_query()
        self.settings, self.flow = change.settings, change.flow
        self.election.settings = change.settings
        if change.restart:
            self._retry_at = 0.0
            self._try_start(time.monotonic())
        log.info("reloaded: topics matching %r%s", change.settings.whitelist,
                 "" if change.restart else " (query unchanged)")
        self.notifier.ready(self._status_line())

    def _shutdown(self) -> int:
        self.notifier.stopping()
        log.info("stopping: %s", "finishing the current batch" if self.mode is None or not self.mode.real_time
                 else "waiting for the target to acknowledge what was sent")
        self._stop_query()
        self.election.close()
        try:
            self.spark.stop()
        except Exception as exc:  # noqa: BLE001 - the JVM may already be gone; nothing left to save
            log.warning("Spark did not stop cleanly: %s", one_line(str(exc)))
        wait_jvm_exit()
        log.info("stopped after mirroring %d records in %d batches", self.positions.mirrored, self.positions.batches)
        return 0

    # -- topics and batches ----------------------------------------------------------------
    def _target_topics(self, topics: dict[str, int]) -> int:
        """Every source topic has its copy in the target; and the source's log start offsets, kept a
        minute, so each batch can tell what was deleted before it could read it. A real-time query whose
        partitions outgrew the task slots restarts (in micro-batch mode)."""
        self.topics.ensure(topics)
        self.positions.note_log_starts(self.source.log_start_offsets((t, p) for t, n in topics.items()
                                                                     for p in range(n)))
        query = self.query
        if query is not None and query.mode.real_time:
            wanted = modes.choose(self.settings.trigger, sum(topics.values()), self._slots())
            if not wanted.real_time:
                self._requery = wanted.reason
        return 0

    def _on_progress(self, progress) -> None:
        """After each batch Spark committed (its listener thread), for the query that runs now."""
        try:
            query = self.query
            if query is None or str(progress.runId) != query.run_id or not progress.sources:
                return
            query.progressed()
            self.positions.on_progress(progress)
        except Exception as exc:  # noqa: BLE001 - a listener error must not stop Spark's event bus
            self.metrics.error("progress")
            log.warning("cannot process the progress of batch %s: %s", getattr(progress, "batchId", "?"), exc)

    def _mirrored_topics(self) -> dict[str, int]:
        return self.source.partitions(self.flow.pattern)

    def _sync_groups(self) -> int:
        """Source groups' offsets, translated, into the target's groups (sync.group.offsets.enabled)."""
        s = self.settings
        return self.translation.sync_group_offsets(self._mirrored_topics(), self.flow.policy, s.groups,
                                                   s.groups_exclude, s.group_id)

    def _emit_checkpoints(self) -> int:
        """Source groups' offsets, translated, into the checkpoints topic on the target."""
        s = self.settings
        self.translation.emit_checkpoints(self._mirrored_topics(), self.flow.policy, s.groups, s.groups_exclude,
                                          s.group_id)
        self.metrics.last_checkpoint.labels(s.flow).set(time.time())
        return 0

    # -- status ----------------------------------------------------------------------------
    def _status_line(self) -> str:
        standby = None if self.election.active() else self.settings.flow
        return status_line(self.positions, self.acks.rate, self.mode, self.clusters.away(), standby)
