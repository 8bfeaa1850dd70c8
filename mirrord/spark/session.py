"""Spark's side of mirrord: the JVM, the SparkSession and what mirrord asks of them.

One SparkSession per process, kept across query restarts and reloads, in a JVM of its own process
group (signals are mirrord's). mirrord's jar (jvm/) rides along: its source, its writer and a Spark plugin
that brings the writers' counts and acknowledged positions from every executor to the driver, where
`jvm_totals` reads them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
from collections.abc import Callable

from mirrord.errors import ClusterUnavailable, MirrordError
from mirrord.jars import PACKAGE_DIR, connector_jars
from mirrord.kafka import admin
from mirrord.settings.config import Settings
from mirrord.settings.flow import Flow
from mirrord.settings.keys import EXACTLY_ONCE
from mirrord.settings.redact import SECRET_KEY, redact

log = logging.getLogger(__name__)


WRITER = "io.mirrord.sink.MirrorWriter"
PLUGIN = "io.mirrord.metrics.MirrordPlugin"
# the writer's plugin first: an executor's stop closes the streams' senders, then the metrics ship the last counts
PLUGINS = f"io.mirrord.sink.WriterPlugin,{PLUGIN}"
# The JVM options mirrord sets (its log4j2 configuration, its heap's regions) and a [spark] section adds to.
JAVA_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
# A consumer's fetch response is one array of up to max.partition.fetch.bytes (1 MiB) a partition; in G1's 1 MiB
# regions (its choice for heaps under 2 GiB) every array of half a region or more is humongous: allocated outside
# the young generation, and each such allocation may start a collection. Regions of 16 MiB keep a stream's fetches
# of up to 8 MiB young (docs/decisions.md §1). An option of the [spark] section's comes later and wins.
HEAP_REGIONS = "-XX:G1HeapRegionSize=16m"


def spark_conf(settings: Settings, jars: list[str]) -> dict[str, str]:
    """The SparkSession's settings: mirrord's, the [spark] section's, and what mirrord adds to both.

    The [spark] section's JVM options come after mirrord's own (its log4j2 configuration, its heap's regions)
    instead of replacing them, as its plugins come after mirrord's plugin."""
    own = f"-Dlog4j2.configurationFile=file:{PACKAGE_DIR / 'log4j2.properties'} {HEAP_REGIONS}"
    user = dict(settings.spark_conf)
    plugins = ",".join(p for p in (PLUGINS, user.pop("spark.plugins", "")) if p)
    java = {key: " ".join(o for o in (own, user.pop(key, "").strip()) if o) for key in JAVA_OPTIONS}
    own_regex = user.pop("spark.redaction.regex", "")
    return {
        "spark.jars": ",".join(jars),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(settings.num_streams or os.cpu_count() or 1),
        "spark.sql.session.timeZone": "UTC",
        **java,
        "spark.sql.streaming.noDataProgressEventInterval": "5000",
        "spark.sql.adaptive.enabled": "false",  # streaming queries never use it; each start would warn
        **user,
        "spark.plugins": plugins,
        # exactly once: a task attempt skips what an earlier attempt of its stream committed, so Spark may run a task
        # again (spark.task.maxFailures is Spark's or the [spark] section's), but never two attempts of it at once,
        # each fencing the other's producer (docs/decisions.md §12)
        **({"spark.speculation": "false"} if settings.delivery == EXACTLY_ONCE else {}),
        # Spark's default misses kafka.sasl.jaas.config: mirrord's secret keys, and the operator's own regex
        "spark.redaction.regex": SECRET_KEY.pattern + (f"|(?:{own_regex})" if own_regex else ""),
    }


def spark_session(settings: Settings, master: str):
    """One SparkSession per process, kept across query restarts and reloads, on `master` (the configured
    one, or the `local[N]` mirrord sized)."""
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the driver's own; executors run no Python
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = SparkConf().setMaster(master).setAppName(f"mirrord-{settings.flow}")
    conf.setAll(spark_conf(settings, connector_jars()).items())
    try:
        _launch_jvm(conf)
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
        spark._jvm.io.mirrord.metrics.DroppedUdf.register(spark._jsparkSession)
    except Exception as exc:  # noqa: BLE001 - py4j/JVM start failures come in many types
        first = redact(str(exc).splitlines()[0])
        raise MirrordError(f"cannot start Spark ({master}): {first}") from None
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _launch_jvm(conf) -> None:
    """Spark's JVM in a session of its own: a SIGTERM or Ctrl-C meant for mirrord (systemd, or a
    terminal signalling the whole process group) reaches mirrord only, which then stops the query
    between batches and lets the JVM exit; the JVM still exits by itself if mirrord dies (its stdin
    closes)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is None:
        SparkContext._ensure_initialized(gateway=launch_gateway(conf, popen_kwargs={"start_new_session": True}))


def jvm_class(spark, name: str):
    """A class of Spark's JVM by its full name, for its static members. `spark._jvm.io.mirrord.X` walks the
    packages one py4j lookup at a time, each a miss across the whole class path: about 3.5 ms of the JVM's CPU
    against 0.4 here, and the supervisor, its lease and its metrics ask a dozen times a second."""
    from py4j.java_gateway import JavaClass

    return JavaClass(name, spark._jvm._gateway_client)


def stop_between_batches(spark, query, timeout: float) -> bool:
    """Stop the query once the batch in flight has committed (io.mirrord.query.QueryStopper), or after
    `timeout` seconds anyway; True when it stopped between batches (nothing will be copied twice)."""
    return bool(jvm_class(spark, "io.mirrord.query.QueryStopper").stopBetweenBatches(query._jsq, int(timeout * 1000)))


# What Spark logs, as errors, when a real-time query is stopped: its long tasks are interrupted mid-write.
TASK_ABORTS_SETTLE = 3.0
# (the task's own abort lines are off for good: mirrord/log4j2.properties)
TASK_ABORT_LOGGERS = ("org.apache.spark.scheduler.TaskSetManager", "org.apache.spark.scheduler.DAGScheduler")


@contextlib.contextmanager
def quiet_task_aborts(spark):
    """Spark's own error lines for the tasks a stop interrupts, silenced while mirrord stops a query (what
    they sent is accounted for by the target's acknowledgements, not lost)."""
    levels = spark._jvm.org.apache.logging.log4j.Level
    configurator = spark._jvm.org.apache.logging.log4j.core.config.Configurator
    for name in TASK_ABORT_LOGGERS:
        configurator.setLevel(name, levels.OFF)
    def restore() -> None:
        for name in TASK_ABORT_LOGGERS:
            configurator.setLevel(name, levels.WARN)
    try:
        yield
    finally:  # the killed tasks report in from the executor's threads a moment after the stop returns
        timer = threading.Timer(TASK_ABORTS_SETTLE, restore)
        timer.daemon = True
        timer.start()


def jvm_totals(spark) -> dict:
    """Records, bytes and replication latency counted by the writers on every executor, and the
    acknowledged position of every source partition, as the metrics plugin gathered them on the driver
    (cumulative since the session started; this JVM's own executor's counts included up to now)."""
    return json.loads(jvm_class(spark, PLUGIN).totalsJson())


def jvm_positions(spark) -> dict[tuple[str, int], int]:
    """The acknowledged position of every source partition, as their owner in the JVM holds them
    (io.mirrord.positions.Positions, docs/decisions.md §10), as of the caller's `jvm_totals` just before: that call
    drains this JVM's own executor (local mode) into it; draining again here built every partition's counts twice
    per read."""
    raw = json.loads(jvm_class(spark, "io.mirrord.positions.Positions").DRIVER.json())
    return {(topic, int(p)): int(o) for topic, parts in raw.items() for p, o in parts.items()}


def jvm_lost(spark) -> list[tuple[dict[tuple[str, int], tuple[int, int]], str]]:
    """Source records the streams knew of and never read since the last call (their topic deleted, or they were,
    below the log start a stream's next fetch found): each a partition's offsets [from, to) and why
    (io.mirrord.metrics.Stats#addLost)."""
    return [({(topic, partition): (begin, stop)}, why)
            for topic, partition, begin, stop, why in json.loads(jvm_class(spark, PLUGIN).lostJson())]


def flush_positions(spark) -> bool:
    """Commit the acknowledged positions to the source group now (the JVM does it every 250 ms anyway);
    False when the group could not be reached, or this host is fenced."""
    jvm_class(spark, PLUGIN).totalsJson()
    return bool(jvm_class(spark, "io.mirrord.positions.GroupCommitter").flush())


def in_flight(spark) -> int:
    """Records this JVM's producers sent and the target has not yet acknowledged (or failed): after a
    query stopped, the streams' producers still deliver what they buffered. Executors of a Spark cluster
    are other JVMs: there, nothing is known (0)."""
    return int(jvm_class(spark, WRITER).inFlight())


def java_members(spark, flow: Flow) -> Callable[[str, float], list[admin.Member]]:
    """A consumer group's members on the target, asked through Kafka's Java Admin in this JVM
    (io.mirrord.fencing.GroupMembers; admin.Cluster.members says why), with the producer's Java properties."""
    config = flow.target_properties
    describe = spark._jvm.io.mirrord.fencing.GroupMembers.describe

    def members(group: str, timeout: float) -> list[admin.Member]:
        try:
            rows = [str(row).split("\t") for row in describe(config, group, int(timeout * 1000))]
        except Exception as exc:  # noqa: BLE001 - py4j wraps the Java client's error
            raise ClusterUnavailable(f"cannot describe group {group} on the target: "
                                     f"{one_line(str(getattr(exc, 'java_exception', exc)))}") from None
        return [admin.Member(client, host, held == "1") for client, host, held in rows]
    return members


def java_leave(spark, flow: Flow) -> Callable[[str, list[str], float], dict[str, str]]:
    """Members of a group on the target taken out by member id, as a member leaving would
    (io.mirrord.fencing.LapsedMembers: Kafka's Admin removes static members only): {member id: Kafka's error name,
    NONE when it left}."""
    config = flow.target_properties
    leave = spark._jvm.io.mirrord.fencing.LapsedMembers.leave

    def left(group: str, members: list[str], timeout: float) -> dict[str, str]:
        try:
            rows = [str(row).split("\t") for row in leave(config, group, members, int(timeout * 1000))]
        except Exception as exc:  # noqa: BLE001 - py4j wraps the Java client's error
            raise ClusterUnavailable(f"cannot take members out of group {group} on the target: "
                                     f"{one_line(str(getattr(exc, 'java_exception', exc)))}") from None
        return {member: error for member, error in rows}
    return left


def warm_producer(spark, flow: Flow) -> None:
    """A Kafka producer of the target's properties made in this JVM, asked for the offset-syncs topic's partitions
    and closed, sending nothing: its classes loaded and its client's path run before a take-over's first record
    (a standby's rehearsal: its query over no topic makes no producer). No interceptor: it writes nothing."""
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    for key, value in flow.target_properties.items():
        if key != "interceptor.classes":
            props.setProperty(key, value)
    serializer = "org.apache.kafka.common.serialization.ByteArraySerializer"
    props.setProperty("key.serializer", serializer)
    props.setProperty("value.serializer", serializer)
    producer = jvm.org.apache.kafka.clients.producer.KafkaProducer(props)
    try:
        producer.partitionsFor(flow.offset_syncs_topic)
    finally:
        producer.close(jvm.java.time.Duration.ofSeconds(1))


def running_tasks(spark) -> int:
    """Tasks running on the session's executors, as their ends reached the driver (a killed task counts
    until it has ended)."""
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return sum(int(info.numRunningTasks()) for info in infos)


def default_parallelism(spark) -> int:
    """Task slots of the session's master (for a cluster: the cores of the executors registered)."""
    return int(spark.sparkContext.defaultParallelism)


KAFKA_EXCEPTION = "org.apache.kafka.common.KafkaException"  # every Kafka client error extends it
TIMEOUT = "org.apache.kafka.common.errors.TimeoutException"  # a cluster did not answer within a client timeout
LAPSED = "io.mirrord.fencing.FencedError"  # a send refused: the lease lapsed (an outage; a halt ends the JVM instead)
OUT_OF_RANGE = "org.apache.kafka.clients.consumer.OffsetOutOfRangeException"
TOO_LARGE = "org.apache.kafka.common.errors.RecordTooLargeException"
# what to do about a record too large, by who refused it: the producer (its text names max.request.size) or the target
TOO_LARGE_HINTS = (("max.request.size", "raise max.request.size in producer.properties above the record's size"),
                   ("", "the target topic's max.message.bytes (or the target broker's message.max.bytes) is below "
                        "the record's size"))
# exactly once: a transaction aborted (a record refused, the producer fenced): copied again from the target's positions
TRANSACTION = "io.mirrord.sink.TransactionFailed"
# Spark's reason for a task whose executor was lost (a TaskEndReason: only its name in the job's error message)
EXECUTOR_LOST = "ExecutorLostFailure"


def failure(query) -> tuple[str, str] | None:
    """Why a stopped query stopped, as (kind, one line): kind "deleted" when the source deleted records
    before a real-time task read them (its reader does not skip them, as micro-batch's does), "timeout"
    when a Kafka client waited for a cluster longer than its timeouts allow (with leader election they are
    bounded by the lease: a broker's restart outlasts them), "lapsed" when a send was refused because the
    lease lapsed (the election could not be confirmed: an outage), "delivery" when a cause is another Kafka client
    exception (the target refused records), "transaction" when exactly-once mode's transaction could not commit
    (it was aborted), "executor" when Spark lost the executor of a task more often than spark.task.maxFailures
    allows (a node drained, a container preempted, a worker restarted), else "query"; None while it runs."""
    from py4j.java_gateway import is_instance_of
    from pyspark import SparkContext

    if query.isActive:
        return None
    java = query._jsq.exception()
    if java.isEmpty():
        return "query", "query stopped"
    cause = java.get()
    kind = "query"
    kafka = []  # the Kafka client exceptions of the chain, outermost first
    while cause is not None:
        is_kafka = is_instance_of(SparkContext._gateway, cause, KAFKA_EXCEPTION)
        if is_kafka:
            kafka.append(cause)
        if is_instance_of(SparkContext._gateway, cause, OUT_OF_RANGE):
            kind = "deleted"
        elif kind == "query" and is_instance_of(SparkContext._gateway, cause, TRANSACTION):
            kind = "transaction"
        elif kind == "query" and is_instance_of(SparkContext._gateway, cause, LAPSED):
            kind = "lapsed"
        elif kind in ("query", "delivery") and is_instance_of(SparkContext._gateway, cause, TIMEOUT):
            kind = "timeout"
        elif kind == "query" and is_kafka:
            kind = "delivery"
        elif kind == "query" and EXECUTOR_LOST in str(cause.getMessage() or ""):
            kind = "executor"
        root, cause = cause, cause.getCause()
        if cause is not None and cause.equals(root):
            break
    return kind, redact(_one_line(root, kafka, is_instance_of(SparkContext._gateway, root, TOO_LARGE))[:500])


def _one_line(root, kafka: list, too_large: bool) -> str:
    """The root cause's text, or the outermost Kafka exception's that wraps it with context (mirrord's writer names
    the record: `record 2 of t-0 not delivered to t: …`); for a record too large, what to change."""
    text = str(root.toString()).splitlines()[0]
    line = next((str(k.getMessage()).splitlines()[0] for k in kafka
                 if not k.equals(root) and text in str(k.getMessage() or "")), text)
    if too_large:
        line += "; " + next(hint for said, hint in TOO_LARGE_HINTS if said in text)
    return line


def add_progress_listener(spark, on_progress: Callable[[object], None]) -> None:
    """Call `on_progress(StreamingQueryProgress)` after every trigger of every query in the session:
    the progress holds each batch's planned source offsets, which foreachBatch does not see.

    Not pyspark's StreamingQueryListener: it builds each event's progress field by field over py4j, a hundred
    calls that Spark's listener thread serves one by one (measured: 0.2 s of the JVM's CPU an event, which
    tripled an idle micro-batch query's CPU). Here the progress crosses once, as its JSON."""
    from pyspark import SparkContext
    from pyspark.java_gateway import ensure_callback_server_started
    from pyspark.sql.streaming.listener import StreamingQueryProgress

    class ProgressListener:  # py4j's side of Spark's PythonStreamingQueryListener
        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            on_progress(StreamingQueryProgress.fromJson(json.loads(event.progress().json())))

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

        class Java:
            implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]

    ensure_callback_server_started(SparkContext._gateway)
    wrapper = jvm_class(spark, "org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper")
    spark._jsparkSession.streams().addListener(wrapper(ProgressListener()))


def jvm_exit_status() -> int | None:
    """The exit status of Spark's JVM if it has exited (75: it fenced itself, io.mirrord.fencing.Fence), else None."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    return None if proc is None else proc.poll()


def wait_jvm_exit(timeout: float = 30.0) -> None:
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


def one_line(text: str) -> str:
    """The informative line of a Spark/Python exception dump (the mirrord error if there is one)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "mirrord.errors." in line:
            return line.split("mirrord.errors.", 1)[1]
    return lines[0][:500] if lines else "unknown error"


def spark_version() -> str:
    try:
        import pyspark

        return pyspark.__version__
    except ImportError:
        return ""
