"""Where the JVM's jars are: Spark's Kafka connector and mirrord's own (jvm/), for Spark and for the JVM
that judges the .properties files with Kafka's own clients."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mirrord.errors import ConfigError

PACKAGE_DIR = Path(__file__).resolve().parent  # mirrord/, which holds log4j2.properties
JVM_JAR = "mirrord-jvm"


def connector_jars() -> list[str]:
    """Spark's Kafka connector jars and mirrord's own (the source, the writer, the metrics
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
