"""mirrord's writer against Spark's own Kafka sink, measured without the daemon around it.

`python -m bench.encoding [--reps 2] [--records 3000000] [--trigger real-time]` starts a broker pair, loads a
12-partition topic with 100 B records and copies it with a bare Spark query (micro-batch in `local[2]`, or
real-time mode with 60 s batches in `local[13]`: a slot per partition and a spare) three ways, interleaved per rep:
`plain` (Spark's sink, no fidelity: the producer's timestamps, no positions), `writer` (mirrord's writer,
io.mirrord.sink.MirrorWriter at least once: timestamps kept, positions counted, a producer per task) and `syncs`
(the same writing offset syncs). It prints records/s from the first record seen on the target to the last.
docs/decisions.md section 2 quotes it (its `envelope` mode measured the key envelope and interceptor that the
writer replaced).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.procs import dump_flight_recordings
from tests.harness.kafka import run_class, start_pair
from tests.harness.records import count, create_topic, wait_until

ROOT = Path(__file__).resolve().parents[1]
RECORDING = "-XX:StartFlightRecording=settings=profile"  # --jfr: each query's JVM records, dumped before it is killed
QUERY = r'''
import glob, os, sys
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
from pyspark.sql import SparkSession
mode, source, target, topic, out, checkpoint, jars, trigger = sys.argv[1:]
master = "local[13]" if trigger == "real-time" else "local[2]"
spark = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
         .config("spark.jars", ",".join(sorted(glob.glob(jars + "/*.jar")))).getOrCreate())
spark.sparkContext.setLogLevel("WARN")
producer = {"bootstrap.servers": target, "acks": "all", "enable.idempotence": "true", "linger.ms": "5",
            "batch.size": "262144"}
records = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", source).option("subscribe", topic)
           .option("startingOffsets", "earliest").option("includeHeaders", "true").load())
if mode == "plain":
    writer = (records.selectExpr(f"'{out}' AS topic", "key", "value", "headers", "partition").writeStream
              .format("kafka").option("checkpointLocation", checkpoint))
    for k, v in producer.items():
        writer = writer.option("kafka." + k, v)
else:  # the columns of mirrord/spark/pipeline.py; the writer names the target topic <out>.<topic>
    writer = (records.selectExpr("topic", "key", "value", "headers", "partition", "offset",
                                 "unix_millis(timestamp) AS timestamp").writeStream
              .option("checkpointLocation", checkpoint))
    partitions = 12  # a task per partition (Spark's Kafka source), each its own stream and producer
    writer._jwrite = writer._jwrite.foreach(spark._jvm.io.mirrord.sink.MirrorWriter.atLeastOnce(
        producer, partitions, partitions, False, "syncs" if mode == "syncs" else "", 100, out[:-len(topic)]))
if trigger == "real-time":
    writer = writer.outputMode("update").trigger(realTime="60 seconds")
writer.start().awaitTermination()
'''


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.encoding")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--trigger", choices=("micro-batch", "real-time"), default="micro-batch")
    ap.add_argument("--modes", default="plain,writer,syncs", help="which of plain, writer, syncs to run")
    ap.add_argument("--jfr", type=Path, help="write each run's Java Flight Recording into DIR/<run>/<pid>.jfr")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-encoding-"))
    (work / "query.py").write_text(QUERY)
    source, target = start_pair(work / "kafka", jvm_options=[])  # both compilers, as a production broker
    try:
        create_topic(source.bootstrap, "load", 12)
        create_topic(target.bootstrap, "syncs", 1, config={"cleanup.policy": "compact"})
        loaded = run_class("org.apache.kafka.tools.ProducerPerformance", "--topic", "load", "--num-records",
                           str(a.records), "--record-size", "100", "--throughput", "-1", "--producer-props",
                           f"bootstrap.servers={source.bootstrap}", "linger.ms=5", "batch.size=262144", timeout=600)
        if loaded.returncode != 0 or count(source.bootstrap, "load") < a.records:
            raise SystemExit(f"loading the source failed: {loaded.stderr[-2000:] or loaded.stdout[-2000:]}")
        for rep in range(a.reps):
            for mode in a.modes.split(","):
                out = f"out-{mode}-{rep}.load"
                create_topic(target.bootstrap, out, 12)
                proc = subprocess.Popen(
                    [sys.executable, str(work / "query.py"), mode, source.bootstrap, target.bootstrap, "load", out,
                     str(work / f"checkpoint-{out}"), str(ROOT / ".cache" / "jars" / "spark"), a.trigger],
                    stdout=open(work / f"{out}.log", "w"), stderr=subprocess.STDOUT, start_new_session=True,
                    env={**os.environ, "JAVA_TOOL_OPTIONS": RECORDING} if a.jfr else None)
                try:
                    wait_until(lambda out=out: count(target.bootstrap, out) > 0, 180, "the first record", interval=0.05)
                    began = time.monotonic()
                    wait_until(lambda out=out: count(target.bootstrap, out) >= a.records, 600, "the copy",
                               interval=0.2)
                    rate = a.records / (time.monotonic() - began)
                    print(f"rep {rep + 1} {a.trigger} {mode:9} {rate:>10,.0f} records/s", flush=True)
                finally:
                    if a.jfr:
                        (a.jfr / out).mkdir(parents=True, exist_ok=True)
                        dump_flight_recordings(proc.pid, (a.jfr / out).resolve())
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    finally:
        source.destroy()
        target.destroy()


if __name__ == "__main__":
    main()
