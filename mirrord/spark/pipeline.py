"""The data path: a Spark Structured Streaming query from the source cluster to the target cluster.

Records never enter Python (docs/decisions.md §2). mirrord's own source (jvm/, `io.mirrord.source`,
format `mirrord`: the whitelist's topics, `num.streams` streams each one consumer polling a group of
partitions, topics and partitions that appear later picked up without a restart) → one `select` →
Spark's own Kafka sink, all in the JVM. The select names the target topic (replication policy), keeps key,
value, headers and partition, and wraps the key in an envelope (`mirrord_envelope`, a Java UDF) with the
source timestamp and offset; mirrord's producer interceptor (jvm/, `io.mirrord.sink.MirrorInterceptor`)
unwraps it before the record is sent, restores the timestamp, writes the offset syncs and counts the
acknowledged positions. Spark commits each batch to its checkpoint only after every record was
acknowledged: at-least-once.

Two triggers run the same select (modes.py says which and why): real-time mode, one long task per
stream, a batch being only a checkpoint interval (`checkpoint.interval.ms`); and micro-batch mode, a
batch every `offset.commit.interval.ms` of at most `max.offsets.per.trigger` records.
"""

from __future__ import annotations

import logging
import os
import tempfile

from mirrord.errors import ConfigError
from mirrord.identity import FlowIdentity
from mirrord.settings import transforms
from mirrord.settings.flow import Flow
from mirrord.settings.keys import EXACTLY_ONCE
from mirrord.settings.policy import Policy
from mirrord.spark import exactly_once
from mirrord.spark.modes import Mode
from mirrord.spark.session import ENVELOPE_UDF, spark_session

log = logging.getLogger(__name__)
SOURCE_FORMAT = "mirrord"  # io.mirrord.source.MirrordSource
MAX_POLL_RECORDS = "5000"  # a stream's fetches (Kafka's default 500): measured faster in a backfill
TOPIC_REFRESH_MS = 5000  # how often the source lists the topics: a new one starts within two looks
NO_TOPIC = "(?!)"  # a rehearsal's whitelist: a regex no name matches


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
                    spark = spark_session(flow.settings, "local[1]")
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

    def records(self, starting: str, mode: Mode, rehearsal: bool = False):
        """The source, transformed, as the sink takes it (a rehearsal's: no topic, and no positions committed)."""
        s = self.flow.settings
        options = dict(self.flow.source_options.spark_options)
        options.setdefault("kafka.max.poll.records", MAX_POLL_RECORDS)
        reader = (self.spark.readStream.format(SOURCE_FORMAT)
                  .option("subscribePattern", NO_TOPIC if rehearsal else self.flow.pattern)
                  .option("num.streams", str(mode.streams))
                  .option("topic.refresh.ms", str(TOPIC_REFRESH_MS))
                  .option("startingOffsets", starting))
        if not rehearsal:
            reader = reader.option("positions.group.id", s.group_id)  # the JVM commits positions there (§10)
        if not mode.real_time and s.max_offsets_per_trigger:  # real-time batches end on the clock, not a count
            reader = reader.option("maxOffsetsPerTrigger", str(s.max_offsets_per_trigger))
        return mirrored(reader.options(**options).load(), self.flow)

    def start(self, starting: str, mode: Mode, identity: FlowIdentity | None = None):
        """The query, started: into Spark's Kafka sink (at least once) or mirrord's transactional writer
        (exactly once, exactly_once.py, under the flow's `identity`), which take the same columns."""
        s = self.flow.settings
        writer = (self.records(starting, mode).writeStream
                  .queryName(f"mirrord-{s.flow}")
                  .option("checkpointLocation", str(s.checkpoint_dir)))
        if s.delivery == EXACTLY_ONCE:
            writer._jwrite = writer._jwrite.foreach(exactly_once.java_writer(self.spark, self.flow, identity,
                                                                                 mode.streams))
        else:
            writer = writer.format("kafka").options(**self.flow.sink_options)
        if mode.real_time:
            writer = writer.outputMode("update").trigger(realTime=f"{s.checkpoint_interval_ms} milliseconds")
        else:
            writer = writer.trigger(processingTime=f"{s.batch_interval_ms} milliseconds")
        return writer.start()

    def rehearse(self, mode: Mode, checkpoint: str):
        """The query as `start` makes it, over no topic, into Spark's Kafka sink whatever the delivery (mirrord's
        transactional writer fences the flow's producers when it opens), checkpointed in `checkpoint`: a standby
        runs it once, so that its JVM has loaded, planned and compiled what a take-over's start needs (docs/
        decisions.md §6). It reads no record, so it sends none, and commits no position."""
        s = self.flow.settings
        writer = (self.records("latest", mode, rehearsal=True).writeStream
                  .queryName(f"mirrord-{s.flow}-rehearsal")
                  .option("checkpointLocation", checkpoint)
                  .format("kafka").options(**self.flow.sink_options))
        if mode.real_time:
            writer = writer.outputMode("update").trigger(realTime=f"{s.checkpoint_interval_ms} milliseconds")
        else:
            writer = writer.trigger(processingTime=f"{s.batch_interval_ms} milliseconds")
        return writer.start()
