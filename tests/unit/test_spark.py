"""The SparkSession's settings: what a [spark] section in mirrord.conf adds to mirrord's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirrord.jars import PACKAGE_DIR
from mirrord.settings.config import load
from mirrord.spark.session import JAVA_OPTIONS, spark_conf

# mirrord's own JVM options: its log4j2 configuration, its heap regions (docs/decisions.md §1)
OWN = f"-Dlog4j2.configurationFile=file:{PACKAGE_DIR / 'log4j2.properties'} -XX:G1HeapRegionSize=16m"


def settings(tmp_path: Path, spark_section: str = ""):
    (tmp_path / "consumer.properties").write_text("bootstrap.servers=src:9092\ngroup.id=g\n")
    (tmp_path / "producer.properties").write_text("bootstrap.servers=dst:9092\n")
    (tmp_path / "mirrord.conf").write_text(f"[mirrord]\nwhitelist = t\nnum.streams = 2\n[spark]\n{spark_section}")
    return load(tmp_path / "mirrord.conf", environ={})


def test_without_a_spark_section_the_jvms_get_mirrords_log4j2_configuration(tmp_path):
    conf = spark_conf(settings(tmp_path), [])
    assert [conf[key] for key in JAVA_OPTIONS] == [OWN, OWN]


@pytest.mark.parametrize("key", JAVA_OPTIONS)
def test_a_spark_sections_java_options_come_after_mirrords_instead_of_replacing_them(tmp_path, key):
    conf = spark_conf(settings(tmp_path, f"{key} = -XX:+UseG1GC -Duser.timezone=UTC\n"), [])
    assert conf[key] == f"{OWN} -XX:+UseG1GC -Duser.timezone=UTC"
    other = next(k for k in JAVA_OPTIONS if k != key)
    assert conf[other] == OWN


def test_both_jvms_options_at_once_and_the_rest_of_the_section_passes_through(tmp_path):
    section = ("spark.driver.extraJavaOptions = -Xss4m\nspark.executor.extraJavaOptions = -Dsome.flag=1\n"
               "spark.driver.memory = 2g\n")
    conf = spark_conf(settings(tmp_path, section), [])
    assert conf["spark.driver.extraJavaOptions"] == f"{OWN} -Xss4m"
    assert conf["spark.executor.extraJavaOptions"] == f"{OWN} -Dsome.flag=1"
    assert conf["spark.driver.memory"] == "2g"
    assert conf["spark.plugins"] == "io.mirrord.sink.WriterPlugin,io.mirrord.metrics.MirrordPlugin"


def test_a_spark_sections_heap_regions_come_last_so_the_jvm_takes_them(tmp_path):
    conf = spark_conf(settings(tmp_path, "spark.driver.extraJavaOptions = -XX:G1HeapRegionSize=4m\n"), [])
    options = conf["spark.driver.extraJavaOptions"].split()
    regions = [o for o in options if o.startswith("-XX:G1HeapRegionSize=")]
    assert regions == ["-XX:G1HeapRegionSize=16m", "-XX:G1HeapRegionSize=4m"]  # the JVM keeps the last
