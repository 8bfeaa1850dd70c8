"""The long-running process: lifecycle, signals, health, systemd notifications, progress.

The main thread only supervises: it polls the streaming query once a second, pings the systemd
watchdog while the query is alive and not stalled, and acts on signals (SIGTERM/SIGINT stop,
SIGHUP reloads). Batches run in Spark; their results arrive through `_on_batch` (a Spark callback
thread), which updates metrics, offset syncs and the source group's committed offsets.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime

from mirrord import admin, checkpoints, translate
from mirrord.config import Settings
from mirrord.errors import MirrordError
from mirrord.metrics import Metrics
from mirrord.notify import Notifier
from mirrord.offsets import OffsetSyncStore, deleted_before_read, parse_source_offsets
from mirrord.pipeline import (
    Flow,
    Pipeline,
    TargetTopics,
    add_progress_listener,
    check_transforms,
    failure,
    has_checkpoint,
    jvm_totals,
    spark_session,
    starting_offsets,
)

log = logging.getLogger("mirrord")
STATUS_EVERY = 10.0
LAG_EVERY = 5.0
STOP_GRACE = 30.0
RESTART_BACKOFF = 5.0
TOPICS_EVERY = 1.0  # new source topics get their target copy within this (their records wait in the producer)


class Daemon:
    def __init__(self, load_settings: Callable[[], Settings], notifier: Notifier):
        self.load_settings = load_settings
        self.notifier = notifier
        self.settings = load_settings()
        self.flow = Flow.from_settings(self.settings)
        self.metrics = Metrics(self.settings.flow, _spark_version())
        self.syncs = OffsetSyncStore()  # read back from the offset-syncs topic before each translation
        self._syncs_lock = threading.Lock()
        self._syncs_reader: admin.OffsetSyncsReader | None = None
        self.positions: dict[tuple[str, int], int] = {}  # next source offset to mirror, per partition
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()  # batches and progress events commit from different threads
        self._log_starts: list[tuple[float, dict[tuple[str, int], int]]] = []  # (time, the source's log starts)
        self._stop = threading.Event()
        self._reload = threading.Event()
        self._mirrored = 0
        self._lost = 0
        self._batches = 0
        self._trigger_since: float | None = None
        self._stall_reported = False
        self._next_ping = 0.0
        self._lag_total: int | None = None
        self._topics: int | None = None
        self.query = None

    # -- lifecycle -------------------------------------------------------------------------
    def run(self) -> int:
        signal.signal(signal.SIGTERM, lambda *_: self._stop.set())
        signal.signal(signal.SIGINT, lambda *_: self._stop.set())
        signal.signal(signal.SIGHUP, lambda *_: self._reload.set())
        s = self.settings
        self.metrics.serve(s.metrics_listen, str(s.config_file or "command line"))
        self._enter_work_dir()
        self._connect()
        self.spark = spark_session(s)
        check_transforms(self.spark, self.flow)
        add_progress_listener(self.spark, self._on_progress)
        self._start_query()
        threading.Thread(target=self._lag_loop, name="lag", daemon=True).start()
        threading.Thread(target=self._periodically, name="topics", daemon=True, args=(
            lambda s: True, lambda s: TOPICS_EVERY, "topics", "create target topics", self._target_topics)).start()
        threading.Thread(target=self._periodically, name="configs", daemon=True, args=(
            lambda s: s.sync_topic_configs, lambda s: s.sync_topic_configs_interval, "config", "sync topic configs",
            lambda topics: admin.sync_topic_configs(self.source, self.target, topics, self.flow.policy))).start()
        threading.Thread(target=self._periodically, name="groups", daemon=True, args=(
            lambda s: s.sync_group_offsets, lambda s: s.sync_group_offsets_interval, "groups",
            "translate consumer group offsets", self._sync_groups)).start()
        self.notifier.ready(self._status_line())
        log.info("mirroring %s -> %s, topics matching %r%s, %s", self.source.bootstrap, self.target.bootstrap,
                 s.whitelist, f" but not {s.topics_exclude!r}" if s.topics_exclude else "", s.spark_master)
        for t in s.transforms:
            log.info("transform %s on topics matching %r", t.name, t.topics)
        return self._supervise()

    def _enter_work_dir(self) -> None:
        """Spark 4.0 writes `artifacts/` into the working directory (SPARK-52396): make that the state
        dir, and clear what a killed predecessor left there."""
        work = self.settings.state_dir / "spark"
        shutil.rmtree(work / "artifacts", ignore_errors=True)
        work.mkdir(parents=True, exist_ok=True)
        os.chdir(work)

    def _connect(self) -> None:
        s = self.settings
        self.source = admin.Cluster("source", translate.admin_settings(s.consumer))
        self.target = admin.Cluster("target", translate.admin_settings(s.producer))
        self.source.check()
        self.target.check()
        admin.ensure_offset_syncs_topic(self.target, self.flow.offset_syncs_topic)
        if self._syncs_reader is not None:
            self._syncs_reader.close()
        self._syncs_reader = admin.OffsetSyncsReader(self.target, self.flow.offset_syncs_topic)
        with self._syncs_lock:
            self.syncs = OffsetSyncStore()

    def _start_query(self) -> None:
        pipeline = Pipeline(self.spark, self.flow)
        self.topics = TargetTopics(self.flow, self.source, self.target)
        self._target_topics(self.source.partitions(self.flow.pattern))
        if has_checkpoint(self.settings):
            starting = "earliest"  # ignored by Spark: the checkpoint decides
        else:
            starting = starting_offsets(self.flow, self.source)
            if starting.startswith("{"):
                resume = {tp: o for tp, o in parse_source_offsets(starting).items() if o >= 0}
                held = self.source.log_start_offsets(resume)
                self._report_deleted(deleted_before_read(resume, held, {}, held))
        self._seed_positions()
        self.query = pipeline.start(starting)
        self.metrics.up.labels(self.settings.flow).set(1)

    def _seed_positions(self) -> None:
        """Mirrored positions before the first batch: the group's commits (written after each batch)."""
        try:
            topics = self.source.partitions(self.flow.pattern)
            committed = self.source.committed(self.settings.group_id, topics) if topics else {}
        except Exception as exc:  # noqa: BLE001 - lag is best effort until the first batch
            log.warning("cannot read group %s's offsets: %s", self.settings.group_id, exc)
            return
        with self._lock:
            for tp, offset in committed.items():
                self.positions.setdefault(tp, offset)

    def _stop_query(self, grace: float = STOP_GRACE) -> None:
        """Let a running batch finish (up to `grace`), then stop; a cut batch is replayed on restart."""
        if self.query is None:
            return
        self.metrics.up.labels(self.settings.flow).set(0)
        deadline = time.monotonic() + grace
        try:
            while self.query.isActive and self.query.status.get("isTriggerActive") and time.monotonic() < deadline:
                self._ping_watchdog()  # a reload waiting for a long batch is not a stall
                time.sleep(0.1)
            self.query.stop()
        except Exception as exc:  # noqa: BLE001 - JVM already gone: nothing to finish; the checkpoint replays
            log.warning("streaming query did not stop cleanly: %s", _one_line(str(exc)))

    def _supervise(self) -> int:
        next_status = time.monotonic() + STATUS_EVERY
        while True:
            if self._stop.is_set():
                return self._shutdown()
            if self._reload.is_set():
                self._reload.clear()
                self._do_reload()
            failed = self._query_failure()
            if failed is not None:
                kind, why = failed
                self.metrics.error(kind)
                self.metrics.up.labels(self.settings.flow).set(0)
                if self.settings.abort_on_send_failure or kind != "delivery":
                    raise MirrordError(f"streaming query failed: {why}")
                log.error("batch failed, retrying from the last committed batch in %.0fs: %s",
                          RESTART_BACKOFF, why)
                if self._stop.wait(RESTART_BACKOFF):
                    continue
                self._start_query()
            now = time.monotonic()
            healthy = self._healthy(now)
            self.metrics.up.labels(self.settings.flow).set(1 if healthy else 0)
            if healthy:
                self._ping_watchdog()
            if now >= next_status:
                line = self._status_line()
                log.info("%s", line)
                self.notifier.status(line)
                next_status = now + STATUS_EVERY
            self._stop.wait(0.5 if self.notifier.watchdog_interval is None else
                            min(0.5, self.notifier.watchdog_interval / 2))

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
        """Alive (the JVM answers) and not stuck in one batch for longer than stall.timeout.ms."""
        try:
            status = self.query.status
        except Exception as exc:  # noqa: BLE001 - a dead JVM raises py4j errors of several kinds
            log.warning("Spark does not answer: %s", exc)
            return False
        if status.get("isTriggerActive"):
            self._trigger_since = self._trigger_since or now
        else:
            self._trigger_since = None
        stalled = self._trigger_since is not None and now - self._trigger_since > self.settings.stall_timeout_ms / 1e3
        if stalled and not self._stall_reported:
            log.warning("batch running for %.0fs (stall.timeout.ms=%d): withholding the watchdog",
                        now - self._trigger_since, self.settings.stall_timeout_ms)
        self._stall_reported = stalled
        return self.query.isActive and not stalled

    def _do_reload(self) -> None:
        self.notifier.reloading()
        try:
            settings = self.load_settings()
            flow = Flow.from_settings(settings)
            check_transforms(self.spark, flow)
        except MirrordError as exc:
            self.notifier.ready(self._status_line())
            log.error("reload refused, keeping the running configuration: %s", exc)
            return
        if (settings.spark_master, settings.spark_conf, settings.flow) != (
                self.settings.spark_master, self.settings.spark_conf, self.settings.flow):
            log.warning("spark.master, [spark] and flow changes take effect at the next restart")
        self._stop_query()
        self.settings, self.flow = settings, flow
        self.source.close()
        self.target.close()
        self._connect()
        self._start_query()
        log.info("reloaded: topics matching %r", settings.whitelist)
        self.notifier.ready(self._status_line())

    def _shutdown(self) -> int:
        self.notifier.stopping()
        log.info("stopping: finishing the current batch")
        self._stop_query()
        try:
            self.spark.stop()
        except Exception as exc:  # noqa: BLE001 - the JVM may already be gone; nothing left to save
            log.warning("Spark did not stop cleanly: %s", _one_line(str(exc)))
        _wait_jvm_exit()
        log.info("stopped after mirroring %d records in %d batches", self._mirrored, self._batches)
        return 0

    # -- batches (Spark callback thread) ---------------------------------------------------
    def _target_topics(self, topics: dict[str, int]) -> int:
        """Every source topic has its copy in the target; and the source's log start offsets, kept a
        minute, so each batch can tell what was deleted before it could read it."""
        self.topics.ensure(topics)
        starts = self.source.log_start_offsets((t, p) for t, n in topics.items() for p in range(n))
        with self._lock:
            self._log_starts.append((time.time(), starts))
            del self._log_starts[:-60]
        return 0

    def _commit(self, positions: dict[tuple[str, int], int], forward_only: bool = True) -> None:
        """Set the mirrored positions and commit them to the consumer's group on the source. What a batch
        wrote is the truth, even backwards (a topic recreated on the source); a batch's end only moves
        positions forward (past transaction markers and deleted records)."""
        with self._commit_lock:
            with self._lock:
                moved = {tp: o for tp, o in positions.items()
                         if o > self.positions.get(tp, 0) or (not forward_only and o != self.positions.get(tp))}
                self.positions.update(moved)
            if not moved:
                return
            try:
                self.source.commit(self.settings.group_id, moved)
            except (MirrordError, Exception) as exc:  # noqa: BLE001 - visibility only; the checkpoint is the truth
                self.metrics.error("commit")
                log.warning("cannot commit mirrored offsets to group %s: %s", self.settings.group_id, exc)

    def _on_progress(self, progress) -> None:
        """After each batch Spark committed (its listener thread): records deleted before they were read
        are reported, and the mirrored positions (lag, the group's offsets on the source) move to the
        batch's end, past transaction markers and deleted records."""
        try:
            query = self.query
            if query is None or str(progress.runId) != str(query.runId) or not progress.sources:
                return
            source = progress.sources[0]
            start, end = parse_source_offsets(source.startOffset), parse_source_offsets(source.endOffset)
            began = _epoch(progress.timestamp)
            with self._lock:
                before = [starts for taken, starts in self._log_starts if taken < began]
                if progress.numInputRows:
                    self._mirrored += progress.numInputRows
                    self._batches += 1
            if before:  # what lay below the log start before the batch began was never there to read
                self._report_deleted(deleted_before_read(start, end, {}, before[-1]))
            self._commit(end, forward_only=False)
            if progress.numInputRows:
                duration = (progress.durationMs or {}).get("triggerExecution", 0) / 1000.0
                self.metrics.batch_duration.labels(self.settings.flow).observe(duration)
                self.metrics.last_commit.labels(self.settings.flow).set(time.time())
        except Exception as exc:  # noqa: BLE001 - a listener error must not stop Spark's event bus
            self.metrics.error("progress")
            log.warning("cannot process the progress of batch %s: %s", getattr(progress, "batchId", "?"), exc)

    def _report_deleted(self, lost: dict[tuple[str, int], tuple[int, int]]) -> None:
        for (topic, partition), (begin, stop) in sorted(lost.items()):
            self.metrics.lost.labels(self.settings.flow, topic).inc(stop - begin)
            with self._lock:
                self._lost += stop - begin
            log.error("%s-%d: %d records (offsets %d to %d) were deleted from the source (retention or "
                      "delete-records) before mirrord read them; they are not in the target",
                      topic, partition, stop - begin, begin, stop - 1)

    def _periodically(self, enabled: Callable[[Settings], bool], interval: Callable[[Settings], float], kind: str,
                      what: str, work: Callable[[dict[str, int]], int]) -> None:
        """`work(mirrored topics)` every interval while enabled (both read from the current settings, so a
        reload applies); it returns how many items failed, counted as `kind` errors."""
        while not self._stop.wait(interval(self.settings)):
            if not enabled(self.settings):
                continue
            try:
                failed = work(self.source.partitions(self.flow.pattern))
            except Exception as exc:  # noqa: BLE001 - a cluster that does not answer: again at the next interval
                failed = 1
                log.warning("cannot %s: %s", what, exc)
            if failed:
                self.metrics.errors.labels(self.settings.flow, kind).inc(failed)

    def _sync_groups(self, topics: dict[str, int]) -> int:
        """Source groups' offsets, translated, into the target's groups (sync.group.offsets.enabled)."""
        s = self.settings
        self._read_syncs()
        checkpoints.sync_group_offsets(self.source, self.target, topics, self.syncs, self._syncs_lock,
                                       self.flow.policy, s.groups, s.groups_exclude, s.group_id)
        return 0

    def _read_syncs(self) -> None:
        """The offset syncs the interceptors wrote since the last round, from the topic on the target."""
        with self._syncs_lock:
            self._syncs_reader.read_to_end(self.syncs.add)

    # -- lag and status --------------------------------------------------------------------
    def _lag_loop(self) -> None:
        """Lag from the source's log-end offsets, independent of Spark: it rises while the target is down."""
        while not self._stop.wait(LAG_EVERY):
            try:
                topics = self.source.partitions(self.flow.pattern)
                ends = self.source.end_offsets((t, p) for t, n in topics.items() for p in range(n))
            except Exception as exc:  # noqa: BLE001 - source unreachable: keep the last values
                self.metrics.error("lag")
                log.debug("lag check failed: %s", exc)
                continue
            with self._lock:
                lags = {tp: max(0, end - self.positions.get(tp, 0)) for tp, end in ends.items()}
            for (topic, partition), lag in lags.items():
                self.metrics.partition_lag.labels(self.settings.flow, topic, str(partition)).set(lag)
            self.metrics.lag.labels(self.settings.flow).set(sum(lags.values()))
            self._lag_total = sum(lags.values())
            self._topics = len(topics)
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
        lag = "?" if self._lag_total is None else self._lag_total
        topics = "?" if self._topics is None else self._topics
        lost = f", {self._lost} records lost (deleted before read)" if self._lost else ""
        return f"{self._mirrored} records mirrored, {rate:.0f} records/s, lag {lag} records, {topics} topics{lost}"


def _epoch(timestamp: str) -> float:
    """Spark's progress timestamp (ISO 8601, UTC, e.g. 2026-11-22T00:42:18.123Z) as Unix seconds."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def _wait_jvm_exit(timeout: float = 30.0) -> None:
    """Close the py4j gateway and let the JVM run its shutdown hooks and exit by itself, so that
    systemd (KillMode=mixed) finds nothing left to SIGKILL."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
        if proc is not None:
            proc.stdin.close()  # the JVM exits when its stdin closes
            proc.wait(timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - shutting down anyway; systemd kills what is left
        log.warning("Spark's JVM did not exit by itself: %s", exc)


def _one_line(text: str) -> str:
    """The informative line of a Spark/Python exception dump (the mirrord error if there is one)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "mirrord.errors." in line:
            return line.split("mirrord.errors.", 1)[1]
    return lines[0][:500] if lines else "unknown error"


def _spark_version() -> str:
    try:
        import pyspark

        return pyspark.__version__
    except ImportError:
        return ""

