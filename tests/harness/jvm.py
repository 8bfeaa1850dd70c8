"""Spark's driver JVM started cheaper in the tests: most of a start is loading and compiling classes.

The suite starts a Spark driver JVM about a hundred times (each mirrord, each `--check` of a transform, the
session's own SparkSession), each burning about 25 s of CPU before its first batch on a 2-core machine.
Two JVM options take most of that away without changing what runs:

- a class-data-sharing archive of the classes a Spark start loads (`-XX:SharedArchiveFile`), made once per
  Java and pyspark and kept in .cache/cds; the JVM checks it against its class path and ignores it if the
  jars changed. Only Spark's own jars are archived, never `spark.jars` (mirrord's jar changes with the tree);
- the client compiler only (`-XX:TieredStopAtLevel=1`): the tests copy thousands of records, not millions,
  and C2 compiling in the background competes with the brokers for the two cores (the brokers themselves run
  on C1 too: kafka_options).

Measured on the test machine (Spark start with a first query, JVM CPU seconds): 25-27 s plain, 15 s with
C1 only, 14-16 s with the archive only, 6-8 s with both. C1's code copies a backlog slower (mirrord catching
up 300 000 records, load 8: 10 200 records/s with C1, 14 400 without), which no test's backlog needs: the
outage test's (minutes of a 50 records/s stream) was caught up 1.5 s after the source's return with C1, and
its run used 162 CPU s against 194 with C2. MIRRORD_TEST_FAST_JVM: 1 (the default) both, cds the archive only,
0 neither.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "cds"
QUIET = "-Xlog:cds=off,cds+dynamic=off"  # an archive the JVM refuses (jars changed) is a slower start, not a line

# What the archive is made from: a local SparkSession running a batch and a streaming query, as mirrord does.
DUMP = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").appName("cds-dump").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "768m").config("spark.sql.shuffle.partitions", "2")
         .config("spark.driver.extraJavaOptions", "-XX:ArchiveClassesAtExit=" + sys.argv[1] + " " + sys.argv[2])
         .getOrCreate())
spark.range(100).selectExpr("id % 3 AS k", "CAST(id AS BINARY) AS v").groupBy("k").count().collect()
query = (spark.readStream.format("rate").option("rowsPerSecond", "100").load()
         .selectExpr("CAST(value AS STRING) AS key", "CAST(timestamp AS STRING) AS value")
         .writeStream.format("memory").queryName("cds").option("checkpointLocation", sys.argv[3]).start())
query.processAllAvailable()
query.stop()
spark.stop()
"""


def spark_driver_options() -> str:
    """JVM options for a Spark driver started by this tree's pyspark: spark.driver.extraJavaOptions."""
    return _options(os.environ.get("MIRRORD_TEST_FAST_JVM", "1"))


@functools.cache
def _options(mode: str) -> str:
    if mode == "0":
        return ""
    archive = _archive()
    return " ".join([*([f"-XX:SharedArchiveFile={archive}", QUIET] if archive else []),
                     *(["-XX:TieredStopAtLevel=1"] if mode != "cds" else [])])


def packaged_driver_options() -> str:
    """spark.driver.extraJavaOptions for the packages' own pyspark (/opt/mirrord in a container, which the archive
    does not match): the client compiler only, as above, unless MIRRORD_TEST_FAST_JVM is 0."""
    return "" if os.environ.get("MIRRORD_TEST_FAST_JVM", "1") == "0" else "-XX:TieredStopAtLevel=1"


def kafka_options() -> list[str]:
    """JVM options for the tests' Kafka brokers and Kafka's command-line classes: the client compiler only, unless
    MIRRORD_TEST_FAST_JVM is 0. Measured, one broker: 7.7 CPU s to its first answer with C2, 4.4 with C1 only;
    idle, 0.061 of a core against 0.046; 100 000 records in and out, 1.9 CPU s against 0.9. The bench's brokers
    keep both compilers (bench/run.py)."""
    return [] if os.environ.get("MIRRORD_TEST_FAST_JVM", "1") == "0" else ["-XX:TieredStopAtLevel=1"]


def spark_section() -> str:
    """A mirrord.conf [spark] section with spark_driver_options(), or nothing: for configurations that have none."""
    options = spark_driver_options()
    return f"\n[spark]\nspark.driver.extraJavaOptions = {options}\n" if options else ""


def _archive() -> Path | None:
    """The archive for this Java and pyspark, made on first use (one process makes it, the others wait)."""
    import pyspark

    java = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME") else "java"
    try:
        version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    key = hashlib.sha256(f"{version}\n{pyspark.__version__}\n{pyspark.__file__}".encode()).hexdigest()[:16]
    archive = CACHE / f"spark-{key}.jsa"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"spark-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not archive.exists():
            with tempfile.TemporaryDirectory(prefix="cds-", dir=CACHE) as scratch:
                made = Path(scratch) / archive.name
                subprocess.run([sys.executable, "-c", DUMP, str(made), QUIET, str(Path(scratch) / "checkpoint")],
                               cwd=scratch, capture_output=True, timeout=600, check=False,
                               env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
                if made.exists():
                    os.replace(made, archive)
    return archive if archive.exists() else None
