"""The data path: a Spark Structured Streaming query from the source cluster to the target cluster.

Records never enter Python (DESIGN decision 10). Spark's Kafka source (`subscribePattern`, so topics
and partitions that appear later are picked up without a restart) → one `select` → Spark's own Kafka
sink, all in the JVM. The select names the target topic (replication policy), keeps key, value,
headers and partition, and wraps the key in an envelope (`mirrord_envelope`, a Java UDF) with the
source timestamp and offset; mirrord's producer interceptor (jvm/, `io.mirrord.MirrorInterceptor`)
unwraps it before the record is sent, restores the timestamp and writes the offset syncs. Spark
commits each micro-batch to its checkpoint only after every record was acknowledged: at-least-once.
Target topics are created by the daemon as source topics appear (`TargetTopics`); a record for a
topic not there yet waits in the producer (`max.block.ms`) until it is.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

from mirrord import admin, transforms, translate
from mirrord.config import ClientConfig, Settings
from mirrord.errors import ConfigError, MirrordError
from mirrord.offsets import parse_source_offsets
from mirrord.policy import Policy, make_policy, subscribe_pattern
from mirrord.redact import SECRET_KEY, dataclass_repr, redact

log = logging.getLogger(__name__)
PACKAGE_DIR = Path(__file__).resolve().parent


JVM_JAR = "mirrord-jvm"
ENVELOPE_UDF = ("mirrord_envelope", "io.mirrord.EnvelopeUdf")
PLUGIN = "io.mirrord.MirrordPlugin"


def connector_jars() -> list[str]:
    """Spark's Kafka connector jars and mirrord's own (the interceptor, the envelope UDF, the metrics
    plugin): $MIRRORD_SPARK_JARS, the installed share dir, or the source tree's cache."""
    env = os.environ.get("MIRRORD_SPARK_JARS")
    candidates = [Path(env)] if env else [Path(sys.prefix) / "share" / "mirrord" / "jars",
                                          PACKAGE_DIR.parent / ".cache" / "jars" / "spark"]
    for folder in candidates:
        jars = sorted(str(p) for p in folder.glob("*.jar"))
        if any("spark-sql-kafka" in j for j in jars) and any(JVM_JAR in j for j in jars):
            return jars
    where = "MIRRORD_SPARK_JARS" if env else "spark connector jars"
    raise ConfigError(None, where, f"Spark's Kafka connector and {JVM_JAR}.jar not found in "
                                   f"{', '.join(map(str, candidates))} (a source tree needs `make jars`)")


def check_java_client(cfg: ClientConfig, kind: str) -> translate.JaasLogin | None:
    """Let Kafka's own Java client judge a .properties file (`io.mirrord.ClientConfigCheck`), as it would
    at start inside Spark, where an unknown key is only a warning: a typo is a config error here. Returns
    its sasl.jaas.config as Kafka's own parser read it (None without one)."""
    import pyspark

    slf4j = sorted((Path(pyspark.__file__).parent / "jars").glob("slf4j-api-*.jar"))
    classpath = os.pathsep.join([*connector_jars(), *map(str, slf4j)])
    java = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME") else "java"
    try:
        with open(cfg.path, "rb") as properties:
            done = subprocess.run([java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath,
                                   f"-Dmirrord.secret.keys={SECRET_KEY.pattern}",
                                   "io.mirrord.ClientConfigCheck", kind], stdin=properties, capture_output=True,
                                  timeout=60, check=False, start_new_session=True)  # signals are mirrord's
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MirrordError(f"cannot check {cfg.path} with Kafka's Java {kind}: {exc}") from None
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    if done.returncode == 1:
        key, _, reason = lines[0].partition("\t")
        raise cfg.error(key or None, redact(reason))
    if done.returncode != 0:
        raise MirrordError(f"cannot check {cfg.path} with Kafka's Java {kind}: "
                           f"{redact(done.stderr.decode('utf-8', 'replace').strip()[:300])}")
    return _jaas_login(lines)


def _unescape(text: str) -> str:
    """ClientConfigCheck's escapes undone: backslash, tab, newline, carriage return."""
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), text)


def _jaas_login(lines: list[str]) -> translate.JaasLogin | None:
    """`jaas<TAB>module<TAB>option<TAB>value` lines (ClientConfigCheck's) as a JaasLogin."""
    rows = [[_unescape(f) for f in line.split("\t")[1:]] for line in lines if line.startswith("jaas\t")]
    if not rows:
        return None
    return translate.JaasLogin(rows[0][0], {option: value for _, option, value in rows if option})


def offset_syncs_topic(settings: Settings) -> str:
    """MirrorMaker 2's name for offset syncs kept on the target cluster (offset-syncs.topic.location=target)."""
    return f"mm2-offset-syncs.{settings.source_alias}.internal"


@dataclass(frozen=True)
class Flow:
    """Everything the data path needs, derived once from Settings."""

    settings: Settings
    policy: Policy
    pattern: str
    source_options: translate.SourceOptions
    sink_options: dict[str, str]
    source_admin: dict[str, str]  # librdkafka settings of mirrord's admin clients
    target_admin: dict[str, str]

    __repr__ = dataclass_repr

    @property
    def offset_syncs_topic(self) -> str:
        return offset_syncs_topic(self.settings)

    def query_differs(self, other: Flow) -> bool:
        """Whether `other` defines another streaming query, so that a reload must restart it; the other
        settings (side jobs' intervals, groups, stall timeout) apply without touching the query."""
        def definition(flow: Flow) -> tuple:
            return (*(getattr(flow, f.name) for f in fields(flow) if f.name != "settings"),
                    flow.settings.batch_interval_ms, flow.settings.max_offsets_per_trigger, flow.settings.whitelist,
                    flow.settings.transforms)
        return definition(self) != definition(other)

    @classmethod
    def from_settings(cls, settings: Settings) -> Flow:
        policy = make_policy(settings.replication_policy, settings.source_alias, settings.target_alias,
                             settings.separator)
        sink, ignored = translate.sink_options(settings.producer)
        source = translate.consumer_to_spark(settings.consumer)
        for cfg in (settings.producer, settings.consumer):  # librdkafka's judgement first: it needs no JVM
            translate.check_librdkafka(cfg, translate.admin_settings(cfg, translate.SHAPE_OF_A_LOGIN))
        target_admin = translate.admin_settings(settings.producer, check_java_client(settings.producer, "producer"))
        source_admin = translate.admin_settings(settings.consumer, check_java_client(settings.consumer, "consumer"))
        for key, why in {**source.ignored, **ignored}.items():
            log.warning("ignoring %s: %s", key, why)
        sink.update({
            "kafka.mirrord.offset.syncs.topic": offset_syncs_topic(settings),
            "kafka.mirrord.offset.lag.max": str(settings.offset_lag_max),
            "kafka.mirrord.source.topic.prefix": policy.target_prefix,
        })
        return cls(settings, policy, subscribe_pattern(settings.whitelist, policy, settings.topics_exclude), source,
                   sink, source_admin, target_admin)


def has_checkpoint(settings: Settings) -> bool:
    offsets = settings.checkpoint_dir / "offsets"
    return offsets.is_dir() and any(offsets.iterdir())


def checkpoint_offsets(settings: Settings) -> dict[tuple[str, int], int]:
    """Where the checkpoint resumes: the end offsets of its last committed batch (empty when none)."""
    checkpoint = settings.checkpoint_dir
    commits = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*") if p.name.isdigit()]
    if not commits:
        return {}
    try:
        lines = (checkpoint / "offsets" / str(max(commits))).read_text().splitlines()
        return {tp: o for tp, o in parse_source_offsets(lines[2]).items() if o >= 0}
    except (OSError, IndexError, ValueError) as exc:
        log.warning("cannot read the checkpoint's offsets: %s", exc)
        return {}


def starting_offsets(flow: Flow, source: admin.Cluster) -> str:
    """Where a first start begins: the group's committed offsets where it has them (a MirrorMaker 1
    deployment with the same group.id switches over without re-copying), else auto.offset.reset."""
    topics = source.partitions(flow.pattern)
    committed = source.committed(flow.settings.group_id, topics) if topics else {}
    if not committed:
        return flow.source_options.starting
    default = -2 if flow.source_options.starting == "earliest" else -1
    spec = {t: {str(p): committed.get((t, p), default) for p in range(n)} for t, n in topics.items()}
    log.info("first start: resuming from group %s's committed offsets on %d partitions",
             flow.settings.group_id, len(committed))
    return json.dumps(spec)


def spark_conf(settings: Settings, jars: list[str]) -> dict[str, str]:
    """The SparkSession's settings: mirrord's, the [spark] section's, and what mirrord adds to both."""
    log4j = f"-Dlog4j2.configurationFile=file:{PACKAGE_DIR / 'log4j2.properties'}"
    user = dict(settings.spark_conf)
    plugins = ",".join(p for p in (PLUGIN, user.pop("spark.plugins", "")) if p)
    own_regex = user.pop("spark.redaction.regex", "")
    return {
        "spark.jars": ",".join(jars),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(settings.num_streams),
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": log4j,
        "spark.executor.extraJavaOptions": log4j,
        "spark.sql.streaming.noDataProgressEventInterval": "5000",
        **user,
        "spark.plugins": plugins,
        # Spark's default misses kafka.sasl.jaas.config: mirrord's secret keys, and the operator's own regex
        "spark.redaction.regex": SECRET_KEY.pattern + (f"|(?:{own_regex})" if own_regex else ""),
    }


def spark_session(settings: Settings):
    """One SparkSession per process, kept across query restarts and reloads."""
    if settings.spark_master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the driver's own; executors run no Python
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession
    from pyspark.sql.types import BinaryType

    conf = SparkConf().setMaster(settings.spark_master).setAppName(f"mirrord-{settings.flow}")
    conf.setAll(spark_conf(settings, connector_jars()).items())
    try:
        _launch_jvm(conf)
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
        spark.udf.registerJavaFunction(*ENVELOPE_UDF, BinaryType())
        spark._jvm.io.mirrord.DroppedUdf.register(spark._jsparkSession)
    except Exception as exc:  # noqa: BLE001 - py4j/JVM start failures come in many types
        first = redact(str(exc).splitlines()[0])
        raise MirrordError(f"cannot start Spark ({settings.spark_master}): {first}") from None
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


def stop_between_batches(spark, query, timeout: float) -> bool:
    """Stop the query once the batch in flight has committed (io.mirrord.QueryStopper), or after
    `timeout` seconds anyway; True when it stopped between batches (nothing will be copied twice)."""
    return bool(spark._jvm.io.mirrord.QueryStopper.stopBetweenBatches(query._jsq, int(timeout * 1000)))


def jvm_totals(spark) -> dict:
    """Records, bytes and replication latency counted by the interceptors on every executor, as the
    metrics plugin gathered them on the driver (cumulative since the session started)."""
    return json.loads(spark._jvm.io.mirrord.MirrordPlugin.totalsJson())


class TargetTopics:
    """Creates each source topic's copy in the target (same partition count; with topic config sync, the
    source topic's own configs) before its records can be written, and adds partitions as the source
    grows. The target is asked only about topics not yet seen."""

    def __init__(self, flow: Flow, source: admin.Cluster, target: admin.Cluster,
                 on_refused: Callable[[str], None] = lambda _topic: None):
        self.flow = flow
        self.source = source
        self.target = target
        self.on_refused = on_refused
        self._ready: dict[str, int] = {}  # source topic → partitions known to exist in the target

    def ensure(self, wanted: dict[str, int]) -> None:
        new = {t: n for t, n in wanted.items() if self._ready.get(t, 0) < n}
        if new:
            admin.ensure_topics(new, self.target, self.flow.policy,
                                self.source if self.flow.settings.sync_topic_configs else None, self.on_refused)
            self._ready.update(new)


def _stage(records, t: transforms.Transform):
    """One transform over a DataFrame of the Kafka source's columns: its filter, then its rewrites."""
    if t.drops:
        records = records.where(transforms.where(t))
    if transforms.replaced(t):
        records = records.selectExpr(*transforms.select(t))
    return records


def _sink_columns(records, policy: Policy):
    """What the sink takes: topic (named by the policy), key in its envelope with the source timestamp and
    offset (built after the transforms, around the transformed key), value, headers, partition."""
    prefix = policy.target_prefix
    return records.selectExpr(
        f"concat({transforms.sql_string(prefix)}, topic) AS topic" if prefix else "topic",
        f"{ENVELOPE_UDF[0]}(key, unix_millis(timestamp), offset, timestampType) AS key",
        "value", "headers", "partition")


def mirrored(records, flow: Flow):
    """The source's records, through the transforms in the order of the file, as the sink takes them."""
    for t in flow.settings.transforms:
        records = _stage(records, t)
    return _sink_columns(records, flow.policy)


def _kafka_source_schema():
    from pyspark.sql import types as T

    header = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
    return T.StructType([
        T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType()),
        T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()), T.StructField("timestamp", T.TimestampType()),
        T.StructField("timestampType", T.IntegerType()), T.StructField("headers", T.ArrayType(header))])


def check_transforms(spark, flow: Flow) -> None:
    """Let Spark analyse every transform against the Kafka source's schema, as the query will see it, so
    that an expression that does not parse, names an unknown column or has the wrong type is a config
    error now (exit 78), not a failed query later. Each expression is judged on its own first, so the
    error names its section and key."""
    from pyspark.errors.exceptions.captured import CapturedException
    from pyspark.logger import PySparkLogger
    from pyspark.sql import types as T

    settings = flow.settings
    if not settings.transforms:
        return
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):  # a traceback per error; ours is one line
        PySparkLogger.getLogger(name).disabled = True
    expected = {"filter": ((T.BooleanType, T.NullType), "a boolean"),
                "key": ((T.BinaryType, T.StringType, T.NullType), "binary or a string"),
                "value": ((T.BinaryType, T.StringType, T.NullType), "binary or a string")}

    def analysed(build, t: transforms.Transform, key: str):
        """The schema of the DataFrame `build()` makes, or a ConfigError naming the section and key with Spark's
        reason (classic Spark analyses as it builds, so both are inside)."""
        try:
            return build().schema
        except CapturedException as exc:
            reason = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
            raise ConfigError(settings.config_file, f"{t.section} {key}", reason) from None

    def java_regex(t: transforms.Transform, key: str, regex: str) -> None:
        try:
            spark._jvm.java.util.regex.Pattern.compile(regex)
        except Exception as exc:  # noqa: BLE001 - py4j wraps Java's PatternSyntaxException
            reason = str(getattr(exc, "java_exception", exc)).splitlines()[0]
            raise ConfigError(settings.config_file, f"{t.section} {key}", f"not a Java regex: {reason}") from None

    records = spark.createDataFrame([], _kafka_source_schema())
    for t in settings.transforms:
        java_regex(t, "topics", t.topics)
        if t.drop_headers:
            java_regex(t, "drop.headers", t.drop_headers)
        for key, (types, what) in expected.items():
            expression = getattr(t, key)
            if not expression:
                continue
            schema = analysed(lambda r=records, e=expression: r.selectExpr(f"({e}) AS mirrord_checked",
                                                                           *transforms.COLUMNS), t, key)
            got = schema["mirrord_checked"].dataType
            if not isinstance(got, types):
                raise ConfigError(settings.config_file, f"{t.section} {key}",
                                  f"must give {what}, got {got.simpleString()}: {expression}")
        if t.filter:  # in a WHERE, where aggregates and generators are not allowed
            analysed(lambda r=records, t=t: r.where(transforms.kept_condition(t)), t, "filter")
        analysed(lambda r=records, t=t: _stage(r, t), t, "topics")
        records = _stage(records, t)
    analysed(lambda: _sink_columns(records, flow.policy), settings.transforms[-1], "topics")


def check_transforms_alone(flow: Flow) -> None:
    """`mirrord --check`: the transforms analysed by a local Spark session of its own (whatever spark.master
    says), started in a scratch directory, since Spark 4.0 writes into its working directory (SPARK-52396)."""
    if not flow.settings.transforms:
        return
    cwd, stderr = os.getcwd(), os.dup(2)
    with tempfile.TemporaryDirectory(prefix="mirrord-check-") as scratch:
        os.chdir(scratch)
        try:
            with open(os.devnull, "wb") as devnull:  # the JVM's own start-up warnings: --check says one line
                os.dup2(devnull.fileno(), 2)
                try:
                    spark = spark_session(dataclasses.replace(flow.settings, spark_master="local[1]"))
                finally:
                    os.dup2(stderr, 2)
                    os.close(stderr)
            try:
                check_transforms(spark, flow)
            finally:
                spark.stop()
        finally:
            os.chdir(cwd)


class Pipeline:
    def __init__(self, spark, flow: Flow):
        self.spark = spark
        self.flow = flow

    def records(self, starting: str):
        """The source, transformed, as the sink takes it."""
        s = self.flow.settings
        reader = (self.spark.readStream.format("kafka")
                  .options(**self.flow.source_options.spark_options)
                  .option("subscribePattern", self.flow.pattern)
                  .option("includeHeaders", "true")
                  .option("failOnDataLoss", "false")
                  .option("startingOffsets", starting))
        if s.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(s.max_offsets_per_trigger))
        return mirrored(reader.load(), self.flow)

    def start(self, starting: str):
        s = self.flow.settings
        return (self.records(starting)
                .writeStream.format("kafka")
                .queryName(f"mirrord-{s.flow}")
                .options(**self.flow.sink_options)
                .option("checkpointLocation", str(s.checkpoint_dir))
                .trigger(processingTime=f"{s.batch_interval_ms} milliseconds")
                .start())


KAFKA_EXCEPTION = "org.apache.kafka.common.KafkaException"  # every Kafka client error extends it


def failure(query) -> tuple[str, str] | None:
    """Why a stopped query stopped, as (kind, one line): kind "delivery" when a cause is Kafka's client's
    exception (the target refused or timed out records), else "query"; None while it runs."""
    from py4j.java_gateway import is_instance_of
    from pyspark import SparkContext

    if query.isActive:
        return None
    java = query._jsq.exception()
    if java.isEmpty():
        return "query", "query stopped"
    cause = java.get()
    kind = "query"
    while cause is not None:
        if is_instance_of(SparkContext._gateway, cause, KAFKA_EXCEPTION):
            kind = "delivery"
        root, cause = cause, cause.getCause()
        if cause is not None and cause.equals(root):
            break
    return kind, redact(str(root.toString()).splitlines()[0][:500])


def add_progress_listener(spark, on_progress: Callable[[object], None]) -> None:
    """Call `on_progress(StreamingQueryProgress)` after every trigger of every query in the session:
    the progress holds each batch's planned source offsets, which foreachBatch does not see."""
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressListener(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            on_progress(event.progress)

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

    spark.streams.addListener(ProgressListener())


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

