"""The data path: a Spark Structured Streaming query from the source cluster to the target cluster.

Source: Spark's Kafka source with `subscribePattern`, so topics and partitions that appear later
are picked up without a restart. Each micro-batch (`foreachBatch`): create missing target topics,
then write every row through `sink.ProduceTask` in the Python workers, then hand the per-partition
summaries to the daemon (metrics, offset syncs, group commit). Spark commits the batch to the
checkpoint only after this returns, so a crash at any point replays the batch: at-least-once.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mirrord import admin, translate
from mirrord.config import Settings
from mirrord.errors import ConfigError, MirrordError
from mirrord.policy import Policy, make_policy, subscribe_pattern
from mirrord.sink import SUMMARY_DDL, ProduceTask

log = logging.getLogger(__name__)
PACKAGE_DIR = Path(__file__).resolve().parent


def connector_jars() -> list[str]:
    """Spark's Kafka connector jars: $MIRRORD_SPARK_JARS, the installed share dir, or the source tree's cache."""
    env = os.environ.get("MIRRORD_SPARK_JARS")
    candidates = [Path(env)] if env else [Path(sys.prefix) / "share" / "mirrord" / "jars",
                                          PACKAGE_DIR.parent / ".cache" / "jars" / "spark"]
    for folder in candidates:
        jars = sorted(str(p) for p in folder.glob("*.jar"))
        if any("spark-sql-kafka" in j for j in jars):
            return jars
    where = "MIRRORD_SPARK_JARS" if env else "spark connector jars"
    raise ConfigError(None, where, f"Spark's Kafka connector not found in {', '.join(map(str, candidates))} "
                                   "(a source tree needs `make jars`)")


@dataclass(frozen=True)
class Flow:
    """Everything the data path needs, derived once from Settings."""

    settings: Settings
    policy: Policy
    pattern: str
    source_options: translate.SourceOptions
    producer_settings: dict[str, str]

    @classmethod
    def from_settings(cls, settings: Settings) -> Flow:
        policy = make_policy(settings.replication_policy, settings.source_alias, settings.target_alias,
                             settings.separator)
        producer, ignored = translate.producer_settings(settings.producer)
        translate.check_librdkafka(settings.producer, producer)
        translate.check_librdkafka(settings.consumer, translate.admin_settings(settings.consumer))
        source = translate.consumer_to_spark(settings.consumer)
        for key, why in {**source.ignored, **ignored}.items():
            log.warning("ignoring %s: %s", key, why)
        return cls(settings, policy, subscribe_pattern(settings.whitelist, policy), source, producer)


@dataclass(frozen=True)
class BatchResult:
    batch_id: int
    duration: float
    partitions: list[dict]

    @property
    def records(self) -> int:
        return sum(p["records"] for p in self.partitions)


def has_checkpoint(settings: Settings) -> bool:
    offsets = settings.checkpoint_dir / "offsets"
    return offsets.is_dir() and any(offsets.iterdir())


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


def spark_session(settings: Settings):
    """One SparkSession per process, kept across query restarts and reloads."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if settings.spark_master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    log4j = f"-Dlog4j2.configurationFile=file:{PACKAGE_DIR / 'log4j2.properties'}"
    conf = {
        "spark.jars": ",".join(connector_jars()),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(settings.num_streams),
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": log4j,
        "spark.executor.extraJavaOptions": log4j,
        "spark.sql.streaming.noDataProgressEventInterval": "5000",
        **settings.spark_conf,
    }
    builder = SparkSession.builder.master(settings.spark_master).appName(f"mirrord-{settings.flow}")
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - py4j/JVM start failures come in many types
        raise MirrordError(f"cannot start Spark ({settings.spark_master}): {str(exc).splitlines()[0]}") from None
    spark.sparkContext.setLogLevel("WARN")
    return spark


class Pipeline:
    def __init__(self, spark, flow: Flow, source: admin.Cluster, target: admin.Cluster,
                 on_batch: Callable[[BatchResult], None]):
        self.spark = spark
        self.flow = flow
        self.source = source
        self.target = target
        self.on_batch = on_batch
        self._ready_topics: dict[str, int] = {}  # source topic → partitions known to exist in the target

    def _ensure_target_topics(self) -> None:
        """Before a batch is written: every source topic it may contain exists in the target, with
        as many partitions. The target is asked only about topics not yet seen, so a target outage
        stalls the batch in the producer (which retries) instead of failing it here."""
        wanted = self.source.partitions(self.flow.pattern)
        new = {t: n for t, n in wanted.items() if self._ready_topics.get(t, 0) < n}
        if new:
            admin.ensure_topics(new, self.target, self.flow.policy,
                                self.source if self.flow.settings.sync_topic_configs else None)
            self._ready_topics.update(new)

    def start(self, starting: str):
        s = self.flow.settings
        reader = (self.spark.readStream.format("kafka")
                  .options(**self.flow.source_options.spark_options)
                  .option("subscribePattern", self.flow.pattern)
                  .option("includeHeaders", "true")
                  .option("startingOffsets", starting)
                  .option("failOnDataLoss", "false"))
        if s.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(s.max_offsets_per_trigger))
        task = ProduceTask(tuple(sorted(self.flow.producer_settings.items())), self.flow.policy)

        def write_batch(df, batch_id: int) -> None:
            started = time.monotonic()
            self._ensure_target_topics()
            planned = time.monotonic()
            # num.streams tasks per batch, each writing several partitions in turn (coalesce keeps each
            # partition's order), instead of one short task, worker hand-off and flush per partition
            rows = [r.asDict() for r in df.coalesce(s.num_streams).mapInArrow(task, SUMMARY_DDL).collect()]
            written = time.monotonic()
            self.on_batch(BatchResult(batch_id, written - started, rows))
            log.debug("batch %d: %d records; target topics %.3fs, write %.3fs, commit %.3fs", batch_id,
                      sum(r["records"] for r in rows), planned - started, written - planned,
                      time.monotonic() - written)

        return (reader.load().writeStream
                .queryName(f"mirrord-{s.flow}")
                .foreachBatch(write_batch)
                .option("checkpointLocation", str(s.checkpoint_dir))
                .trigger(processingTime=f"{s.batch_interval_ms} milliseconds")
                .start())


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
