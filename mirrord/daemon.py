"""The long-running process, a supervisor: signals, systemd notifications, health, reloads, leadership.

The main thread turns every half second: it starts the streaming query once both clusters answer
(health.ClusterWatch) and this host holds the flow (leader.Leadership), notices a failed query and
restarts it when the failure came with an outage, pings the systemd watchdog while mirrord itself is
healthy, and acts on signals (SIGTERM/SIGINT stop between batches, SIGHUP reloads). Records never
pass here: batches run in Spark, and their progress moves the positions (positions.Positions) from
Spark's listener thread. Periodic side jobs (topics, configs, groups, checkpoints, heartbeats, ACLs)
run in the scheduler, each in a module of its own.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable

from mirrord import acls, admin, checkpoints, heartbeats, topic_configs
from mirrord.config import Settings, fixed_changes
from mirrord.errors import ConfigError, MirrordError
from mirrord.health import ClusterWatch
from mirrord.leader import Leadership, leader_topic
from mirrord.metrics import Metrics
from mirrord.notify import Notifier
from mirrord.offsets import deleted_before_read, parse_source_offsets
from mirrord.pipeline import (
    Flow,
    Pipeline,
    TargetTopics,
    add_progress_listener,
    check_transforms,
    checkpoint_offsets,
    failure,
    has_checkpoint,
    jvm_totals,
    one_line,
    spark_session,
    spark_version,
    starting_offsets,
    stop_between_batches,
    wait_jvm_exit,
)
from mirrord.positions import Positions
from mirrord.scheduler import Job, Scheduler

log = logging.getLogger("mirrord")
STATUS_EVERY = 10.0
LAG_EVERY = 5.0
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
        self._trigger_since: float | None = None
        self._stall_reported = False
        self._next_ping = 0.0
        self._ready_sent = False
        self.leadership: Leadership | None = None
        self._standby_since = 0.0
        self._started = False
        self._retry_at = 0.0
        self._start_failures = 0
        self.query = None

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
        self.positions = Positions(self.source, s.group_id, self.metrics)
        self.translation = checkpoints.GroupTranslation(self.source, self.target, self.flow.offset_syncs_topic,
                                                        checkpoints.checkpoints_topic(s.source_alias))
        self.clusters = ClusterWatch([self.source, self.target], self.metrics, self._stop)
        self.clusters.start()
        log.info("starting Spark (%s)", s.spark_master)
        self.spark = spark_session(s)
        self._take_signals()  # again: pyspark's SparkContext makes SIGINT cancel every job and raise
        check_transforms(self.spark, self.flow)
        add_progress_listener(self.spark, self._on_progress)
        threading.Thread(target=self._lag_loop, name="lag", daemon=True).start()
        jobs = Scheduler(self._stop, self.metrics)

        def up() -> bool:  # the side jobs run on the flow's active host only, while both clusters answer
            return self.clusters.all_up() and self._active()
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

    def _enter_work_dir(self) -> None:
        """Spark 4.0 writes `artifacts/` into the working directory (SPARK-52396): make that the state
        dir, and clear what a killed predecessor left there."""
        work = self.settings.state_dir / "spark"
        shutil.rmtree(work / "artifacts", ignore_errors=True)
        work.mkdir(parents=True, exist_ok=True)
        os.chdir(work)

    def _start_query(self) -> None:
        self.translation.prepare()
        pipeline = Pipeline(self.spark, self.flow)
        self.topics = TargetTopics(self.flow, self.source, self.target,
                                   lambda topic: self.metrics.config_refused.labels(self.settings.flow, topic).inc())
        self._target_topics(self.source.partitions(self.flow.pattern))
        self._drop_superseded_checkpoint()
        if has_checkpoint(self.settings):
            starting = "earliest"  # ignored by Spark: the checkpoint decides
        else:
            starting = starting_offsets(self.flow, self.source)
            if starting.startswith("{"):
                resume = {tp: o for tp, o in parse_source_offsets(starting).items() if o >= 0}
                held = self.source.log_start_offsets(resume)
                self.positions.report_deleted(deleted_before_read(resume, held, {}, held))
        self.positions.seed(self._mirrored_topics())
        self.query = pipeline.start(starting)
        self.metrics.up.labels(self.settings.flow).set(1)

    def _drop_superseded_checkpoint(self) -> None:
        """A host taking over resumes from the source group's offsets, which the previous active host
        committed after each batch: a checkpoint of this host's that another host has mirrored past
        would copy those records again, so it goes."""
        if not (self.settings.leader_election and has_checkpoint(self.settings)):
            return
        mine = checkpoint_offsets(self.settings)
        committed = self.source.committed(self.settings.group_id, self._mirrored_topics())
        ahead = {tp: o for tp, o in committed.items() if o > mine.get(tp, -1)}
        if ahead:
            log.info("another host mirrored this flow past this host's checkpoint (%d partitions ahead): "
                     "resuming from group %s's offsets", len(ahead), self.settings.group_id)
            shutil.rmtree(self.settings.checkpoint_dir)

    def _stop_query(self, grace: float = STOP_GRACE) -> None:
        """Stop the query once the batch in flight has committed (up to `grace`), so a restart copies
        nothing twice; while a cluster is away a batch may wait for it indefinitely, so it is cut at
        once (the checkpoint replays it: at least once)."""
        query, self.query = self.query, None
        if query is None:
            return
        self.metrics.up.labels(self.settings.flow).set(0)
        if not self.clusters.all_up():
            grace = 0.0
        outcome: dict[str, object] = {}

        def stop() -> None:
            try:
                outcome["between"] = stop_between_batches(self.spark, query, grace)
            except Exception as exc:  # noqa: BLE001 - JVM already gone: nothing to finish; the checkpoint replays
                outcome["error"] = exc

        stopper = threading.Thread(target=stop, name="stop-query", daemon=True)
        stopper.start()
        while stopper.is_alive():
            self._ping_watchdog()  # waiting for a batch to commit is not a stall
            stopper.join(0.2)
        if self.clusters.is_up("source"):  # the last batch's progress event may never be delivered now
            self.positions.commit(checkpoint_offsets(self.settings))
        if "error" in outcome:
            log.warning("streaming query did not stop cleanly: %s", one_line(str(outcome["error"])))
        elif outcome.get("between"):
            log.info("streaming query stopped between batches")
        else:
            log.warning("streaming query stopped in the middle of a batch (%s): that batch is copied "
                        "again at the next start", "a cluster is unreachable" if grace == 0 else
                        f"it did not finish within {grace:.0f}s")

    def _supervise(self) -> int:
        next_status = 0.0
        while True:
            if self._stop.is_set():
                return self._shutdown()
            if self._reload.is_set():
                self._reload.clear()
                self._do_reload()
            now = time.monotonic()
            if self.query is None:
                self._try_start(now)
            else:
                self._check_query(now)
            healthy = self._healthy(now)
            mirroring = healthy and self.query is not None and self.clusters.all_up()
            self.metrics.active.labels(self.settings.flow).set(1 if self._active() else 0)
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
                     s.whitelist, f" but not {s.topics_exclude!r}" if s.topics_exclude else "", s.spark_master)
            for t in s.transforms:
                log.info("transform %s on topics matching %r", t.name, t.topics)
        if not self._ready_sent:
            self._send_ready()

    def _active(self) -> bool:
        return self.leadership is None or self.leadership.is_active()

    def _elected(self) -> bool:
        """Whether this host may mirror: leader election off, or this host won it. A standby is READY,
        and says so in STATUS and `mirrord_active`."""
        s = self.settings
        if not s.leader_election:
            return True
        if self.leadership is None:
            try:
                admin.ensure_internal_topic(self.target, leader_topic(s.group_id), "leader election")
            except MirrordError as exc:
                log.warning("%s; retrying in %.0fs", exc, RESTART_BACKOFF)
                self._retry_at = time.monotonic() + RESTART_BACKOFF
                return False
            self.leadership = Leadership(self.flow.target_admin, s.group_id,
                                         s.leader_session_timeout_ms, self._stop)
            self.leadership.start()
            self._standby_since = time.monotonic()
        if self.leadership.is_active():
            return True
        if not self._ready_sent and time.monotonic() - self._standby_since > STANDBY_AFTER:
            log.info("standing by: another host mirrors flow %s (group %s)", s.flow, self.leadership.group)
            self._send_ready()
        return False

    def _send_ready(self) -> None:
        self._ready_sent = True
        self.notifier.ready(self._status_line())

    def _check_query(self, now: float) -> None:
        if not self._active():  # another host may be mirroring already: stop now, the checkpoint replays
            log.warning("leadership lost: stopping the streaming query")
            self._stop_query(grace=0.0)
            return
        failed = self._query_failure()
        if failed is None:
            return
        kind, why = failed
        self.query = None
        self.metrics.error(kind)
        if self.clusters.down_within(OUTAGE_MEMORY) or not self.clusters.all_up():
            log.warning("the streaming query stopped while a cluster was unreachable; it restarts from its "
                        "checkpoint when both answer: %s", why)
        elif self.settings.abort_on_send_failure or kind != "delivery":
            raise MirrordError(f"streaming query failed: {why}")
        else:
            log.error("batch failed, retrying from the last committed batch in %.0fs: %s", RESTART_BACKOFF, why)
        self._retry_at = now + RESTART_BACKOFF

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
            return failure(self.query)
        except Exception as exc:  # noqa: BLE001 - the JVM does not answer: the watchdog decides
            log.debug("cannot ask the query how it is: %s", exc)
            return None

    def _healthy(self, now: float) -> bool:
        """The JVM answers, and no batch has run longer than stall.timeout.ms while both clusters
        answered: a batch waiting for an unreachable cluster is not stuck."""
        try:
            status = self.query.status if self.query is not None else None
            if status is None:
                self.spark._jvm.java.lang.System.nanoTime()  # JVM alive, between queries
                return True
        except Exception as exc:  # noqa: BLE001 - a dead JVM raises py4j errors of several kinds
            log.warning("Spark does not answer: %s", one_line(str(exc)))
            return False
        if status.get("isTriggerActive"):
            self._trigger_since = self._trigger_since or now
        else:
            self._trigger_since = None
        running = 0.0 if self._trigger_since is None else min(now - self._trigger_since, self.clusters.up_for())
        stalled = running > self.settings.stall_timeout_ms / 1e3
        if stalled and not self._stall_reported:
            log.warning("batch running for %.0fs while both clusters answer (stall.timeout.ms=%d): withholding "
                        "the watchdog", running, self.settings.stall_timeout_ms)
        self._stall_reported = stalled
        return not stalled

    def _do_reload(self) -> None:
        """Apply a changed configuration without copying anything twice: the query is restarted only
        when its definition changed, and then between batches. What cannot change while running (the
        flow's identity, its state, its clusters) is refused and the running configuration goes on."""
        self.notifier.reloading()
        try:
            settings = self.load_settings()
            refused = fixed_changes(self.settings, settings)
            if refused:
                raise MirrordError(f"{', '.join(refused)} cannot change while mirrord runs (restart it to change "
                                   f"{'them' if len(refused) > 1 else 'it'})")
            flow = Flow.from_settings(settings)
            restart = self.flow.query_differs(flow)
            if restart and not self.clusters.all_up():
                raise MirrordError(f"not during an outage ({'; '.join(self.clusters.away())})")
            check_transforms(self.spark, flow)
        except MirrordError as exc:
            self.metrics.error("reload")
            log.error("reload refused, keeping the running configuration: %s", exc)
            self.notifier.ready(self._status_line())
            return
        if restart:
            self._stop_query()
        self.settings, self.flow = settings, flow
        if restart:
            self._retry_at = 0.0
            self._try_start(time.monotonic())
        log.info("reloaded: topics matching %r%s", settings.whitelist, "" if restart else " (query unchanged)")
        self.notifier.ready(self._status_line())

    def _shutdown(self) -> int:
        self.notifier.stopping()
        log.info("stopping: finishing the current batch")
        self._stop_query()
        if self.leadership is not None:
            self.leadership.close()
        try:
            self.spark.stop()
        except Exception as exc:  # noqa: BLE001 - the JVM may already be gone; nothing left to save
            log.warning("Spark did not stop cleanly: %s", one_line(str(exc)))
        wait_jvm_exit()
        log.info("stopped after mirroring %d records in %d batches", self.positions.mirrored, self.positions.batches)
        return 0

    # -- batches (Spark callback thread) ---------------------------------------------------
    def _target_topics(self, topics: dict[str, int]) -> int:
        """Every source topic has its copy in the target; and the source's log start offsets, kept a
        minute, so each batch can tell what was deleted before it could read it."""
        self.topics.ensure(topics)
        self.positions.note_log_starts(self.source.log_start_offsets((t, p) for t, n in topics.items()
                                                                     for p in range(n)))
        return 0

    def _on_progress(self, progress) -> None:
        """After each batch Spark committed (its listener thread), for the query that runs now."""
        try:
            query = self.query
            if query is None or str(progress.runId) != str(query.runId) or not progress.sources:
                return
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

    # -- lag and status --------------------------------------------------------------------
    def _lag_loop(self) -> None:
        """Lag, and the interceptors' counts, every few seconds."""
        while not self._stop.wait(LAG_EVERY):
            if not self.clusters.is_up("source"):
                continue  # the last values stay, and the outage has its own metric
            try:
                self.positions.update_lag(self._mirrored_topics())
            except Exception as exc:  # noqa: BLE001 - source unreachable: keep the last values
                self.metrics.error("lag")
                log.debug("lag check failed: %s", exc)
                continue
            self._read_jvm_totals()

    def _read_jvm_totals(self) -> None:
        """Records, bytes and latency as the interceptors counted them (per target topic, reported
        under the source topic's name, as lag is)."""
        try:
            totals = jvm_totals(self.spark)
        except Exception as exc:  # noqa: BLE001 - the JVM is restarting or gone: the supervisor sees it
            log.debug("cannot read the interceptors' counts: %s", exc)
            return
        prefix = self.flow.policy.target_prefix
        self.metrics.set_totals({t.removeprefix(prefix): v for t, v in totals.get("topics", {}).items()},
                                totals.get("latency", {}))
        self.metrics.set_filtered(totals.get("filtered", {}))

    def _status_line(self) -> str:
        rate = 0.0
        if self.query is not None:
            try:
                progress = self.query.lastProgress or {}
                rate = float(progress.get("processedRowsPerSecond") or 0.0)
            except Exception:  # noqa: BLE001 - status is informational
                rate = 0.0
        p = self.positions
        lag = "?" if p.lag is None else p.lag
        topics = "?" if p.topics is None else p.topics
        lost = f", {p.lost} records lost (deleted before read)" if p.lost else ""
        line = f"{p.mirrored} records mirrored, {rate:.0f} records/s, lag {lag} records, {topics} topics{lost}"
        away = self.clusters.away()
        if away:
            return f"waiting: {'; '.join(away)}; {line}"
        if not self._active():
            return f"standby: another host mirrors flow {self.settings.flow}; {line}"
        return line
