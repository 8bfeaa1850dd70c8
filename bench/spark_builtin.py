"""Reference contender: Spark's own Kafka source straight into Spark's own Kafka sink, all in the JVM.

The sink's columns are topic, key, value, headers and partition: it has no timestamp column in
Spark 4.0, so every copy gets a new CreateTime. That is why mirrord does not use it.
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
    a = ap.parse_args()
    spark = (SparkSession.builder.master(a.master).appName("bench-spark-builtin")
             .config("spark.jars", ",".join(str(j) for j in sorted(SPARK_JARS.glob("*.jar"))))
             .config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    records = (spark.readStream.format("kafka")
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
    writer.start().awaitTermination()


if __name__ == "__main__":
    main()
