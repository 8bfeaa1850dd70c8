"""The data path: a Spark Structured Streaming query from the source cluster to the target cluster.

Records never enter Python (docs/decisions.md §2). mirrord's own source (jvm/, `io.mirrord.source`,
format `mirrord`: the whitelist's topics, `num.streams` streams each one consumer polling a group of
partitions, topics and partitions that appear later picked up without a restart) → the transforms → one
`select` of plain columns → mirrord's own writer (jvm/, `io.mirrord.sink.MirrorWriter`), all in the JVM. The
writer gives each stream a producer of its own and builds each record once from its row (key, value, headers,
the source timestamp, the same partition number, the target topic the replication policy names); each record's
send callback moves its source partition's position and feeds the offset syncs. At least once, a task's end
waits for every record it sent and fails if one failed, so Spark commits a batch to its checkpoint only after
the target acknowledged all of it; exactly once, the same writer writes in transactions (exactly_once.py).

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
from mirrord.spark import exactly_once
from mirrord.spark.modes import Mode
from mirrord.spark.session import spark_session

log = logging.getLogger(__name__)
SOURCE_FORMAT = "mirrord"  # io.mirrord.source.MirrordSource
MAX_POLL_RECORDS = "5000"  # a stream's fetches (Kafka's default 500): measured faster in a backfill
TOPIC_REFRESH_MS = 5000  # how often the source lists the topics: a new one starts within two looks
# The writer's columns, in the order io.mirrord.sink.MirrorWriter reads them: the source topic (the writer names the
# target topic once per source topic), key, value, headers, partition, source offset, source timestamp in ms.
WRITER_COLUMNS = ("topic", "key", "value", "headers", "partition", "offset", "unix_millis(timestamp) AS timestamp")
# Keys of producer.properties that size the producer's pool: with none of them set, mirrord sizes each stream's
# producer for its partitions (io.mirrord.sink.StreamProducers, docs/decisions.md §2).
POOL_KEYS = ("batch.size", "buffer.memory", "linger.ms")
NO_TOPIC = "(?!)"  # a rehearsal's whitelist: a regex no name matches


def _stage(records, t: transforms.Transform):
    """One transform over a DataFrame of the Kafka source's columns: its filter, then its rewrites."""
    if t.drops:
        records = records.where(transforms.where(t))
    if transforms.replaced(t):
        records = records.selectExpr(*transforms.select(t))
    return records


def _writer_columns(records):
    """What the writer takes (WRITER_COLUMNS), after the transforms: the transformed key, value and headers, the
    source's own topic, partition, offset and timestamp."""
    return records.selectExpr(*WRITER_COLUMNS)


def mirrored(records, flow: Flow):
    """The source's records, through the transforms in the order of the file, as the writer takes them."""
    for t in flow.settings.transforms:
        records = _stage(records, t)
    return _writer_columns(records)


KAFKA_BUFFER_MEMORY = 32 << 20
KAFKA_BATCH_SIZE = 16 << 10


def warn_pool_too_small(flow: Flow, streams: int, partitions: int) -> None:
    """A journal line when producer.properties sizes the pool itself and its `buffer.memory` holds fewer batches than
    a stream has partitions: the producer allocates a whole `batch.size` for each partition's next record, so a
    stream over many partitions waits for acknowledgements before its next record, and its source with it
    (docs/decisions.md §2)."""
    props, sink = flow.settings.producer.properties, flow.target_properties
    per_stream = -(-partitions // max(1, streams))
    try:
        batch = int(str(sink.get("batch.size", KAFKA_BATCH_SIZE)))
        pool = int(str(sink.get("buffer.memory", KAFKA_BUFFER_MEMORY)))
    except ValueError:  # the Java client's own check names it
        return
    if batch > 0 and pool // batch < per_stream:
        keys = " and ".join(k for k in POOL_KEYS if k in props)
        log.warning("%s: buffer.memory %d holds %d batches of batch.size %d, and each of the %d streams writes %d "
                    "partitions, each wanting a batch of its own: sends will wait for room, and the records behind "
                    "them with them. Raise buffer.memory to %d, or remove %s so "
                    "that mirrord sizes the pool for the partitions (docs/decisions.md §2)",
                    flow.settings.producer.path.name, pool, pool // batch, batch, streams, per_stream,
                    4 * per_stream * batch, keys)


def java_writer(spark, flow: Flow, streams: int, partitions: int, identity: FlowIdentity | None = None):
    """The query's sink: an io.mirrord.sink.MirrorWriter for `streams` streams over `partitions` source partitions
    (the flow's at the start: each stream's producer is sized for its share), at least once, or exactly once
    under the flow's `identity` (exactly_once.py)."""
    s = flow.settings
    sized = not any(key in s.producer.properties for key in POOL_KEYS)
    if not sized:
        warn_pool_too_small(flow, streams, partitions)
    writer = spark._jvm.io.mirrord.sink.MirrorWriter
    common = (streams, partitions, sized, flow.offset_syncs_topic, s.offset_lag_max, flow.policy.target_prefix)
    if s.delivery == EXACTLY_ONCE:
        made = writer.exactlyOnce(exactly_once.producer_config(flow), *common, identity.transactional_prefix,
                                  identity.positions_topic, s.transaction_interval_ms)
    else:
        made = writer.atLeastOnce(flow.target_properties, *common)
    return made.sourceArrays(transforms.bytes_kept(s.transforms))


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
    analysed(lambda: _writer_columns(records), settings.transforms[-1], "topics")


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


def _triggered(writer, mode: Mode, s):
    """`writer` in real-time mode (a batch a checkpoint interval) or micro-batch mode (a batch an interval)."""
    if mode.real_time:
        return writer.outputMode("update").trigger(realTime=f"{s.checkpoint_interval_ms} milliseconds")
    return writer.trigger(processingTime=f"{s.batch_interval_ms} milliseconds")


class Pipeline:
    def __init__(self, spark, flow: Flow):
        self.spark = spark
        self.flow = flow

    def records(self, starting: str, mode: Mode, rehearsal: bool = False):
        """The source, transformed, as the writer takes it (a rehearsal's: no topic, and no positions committed)."""
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

    def start(self, starting: str, mode: Mode, partitions: int, identity: FlowIdentity | None = None):
        """The query, started, into mirrord's writer (at least once, or exactly once under the flow's `identity`);
        `partitions`: the source partitions the flow has now."""
        s = self.flow.settings
        writer = (self.records(starting, mode).writeStream
                  .queryName(f"mirrord-{s.flow}")
                  .option("checkpointLocation", str(s.checkpoint_dir)))
        writer._jwrite = writer._jwrite.foreach(java_writer(self.spark, self.flow, mode.streams, partitions,
                                                            identity))
        return _triggered(writer, mode, s).start()

    def rehearse(self, mode: Mode, checkpoint: str):
        """The query as `start` makes it, over no topic, into mirrord's writer at least once whatever the delivery
        (a stream's producer opens at its first record, and no record comes; exactly once would be the same writer
        in transactions), checkpointed in `checkpoint`: a standby runs it once, so that its JVM has loaded, planned
        and compiled what a take-over's start needs (docs/decisions.md §6). It reads no record, so it sends none,
        and commits no position."""
        s = self.flow.settings
        writer = (self.records("latest", mode, rehearsal=True).writeStream
                  .queryName(f"mirrord-{s.flow}-rehearsal")
                  .option("checkpointLocation", checkpoint))
        writer._jwrite = writer._jwrite.foreach(self.spark._jvm.io.mirrord.sink.MirrorWriter.atLeastOnce(
            self.flow.target_properties, mode.streams, 0, False, "", s.offset_lag_max, self.flow.policy.target_prefix))
        return _triggered(writer, mode, s).start()
