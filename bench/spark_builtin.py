"""Reference contender: Spark's own Kafka source straight into Spark's own Kafka sink, all in the JVM.

The sink's columns are topic, key, value, headers and partition: it has no timestamp column, so every
copy gets a new CreateTime. That is why mirrord does not use it as it is. `--mode` runs it as micro-batch,
micro-batch with async progress tracking, or real-time mode (master local[partitions + 1]).
Run as `python -m bench.spark_builtin --source S --target T --pattern RE --checkpoint DIR`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pyspark.sql import SparkSession

SPARK_JARS = Path(__file__).resolve().parents[1] / ".cache" / "jars" / "spark"


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.spark_builtin")
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--pattern", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--producer", action="append", default=[], help="key=value, passed as kafka.<key>")
    ap.add_argument("--mode", choices=("micro-batch", "async", "real-time"), default="micro-batch")
    a = ap.parse_args()
    spark = (SparkSession.builder.master(a.master).appName("bench-spark-builtin")
             .config("spark.jars", ",".join(str(j) for j in sorted(SPARK_JARS.glob("*.jar"))))
             .config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    reader = spark.readStream.format("kafka")
    if a.mode == "async":
        reader = reader.option("kafka.max.poll.records", "5000")
    records = (reader
               .option("kafka.bootstrap.servers", a.source)
               .option("subscribePattern", a.pattern)
               .option("startingOffsets", "earliest")
               .option("includeHeaders", "true")
               .load()
               .select("topic", "key", "value", "headers", "partition"))
    writer = (records.writeStream.format("kafka")
              .option("kafka.bootstrap.servers", a.target)
              .option("checkpointLocation", a.checkpoint))
    for kv in a.producer:
        key, _, value = kv.partition("=")
        writer = writer.option(f"kafka.{key}", value)
    if a.mode == "async":
        writer = writer.option("asyncProgressTrackingEnabled", "true")
    elif a.mode == "real-time":
        writer = writer.outputMode("update").trigger(realTime="30 seconds")
    writer.start().awaitTermination()


if __name__ == "__main__":
    main()
