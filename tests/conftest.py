"""One real source and one real target Kafka broker for the whole test session, and one SparkSession in the
test process for the tests that run queries of their own (made on first use)."""

from __future__ import annotations

import itertools
import os

import pytest

from tests.harness.jvm import spark_driver_options
from tests.harness.kafka import KafkaBroker, start_pair

_names = itertools.count()


@pytest.fixture(scope="session")
def kafka_pair(tmp_path_factory) -> tuple[KafkaBroker, KafkaBroker]:
    source, target = start_pair(tmp_path_factory.mktemp("kafka"))
    yield source, target
    source.destroy()
    target.destroy()


@pytest.fixture
def unique():
    """Distinct topic and group names per test, so tests share the brokers without sharing data."""
    def make(prefix: str) -> str:
        return f"{prefix}-{os.getpid()}-{next(_names)}"
    return make


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """A local SparkSession with Spark's Kafka connector and mirrord's jar (its source among them)."""
    from pyspark.sql import SparkSession

    from mirrord.jars import connector_jars

    session = (SparkSession.builder.master("local[4]").appName("mirrord-tests")
               .config("spark.jars", ",".join(connector_jars()))
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.extraJavaOptions", spark_driver_options())
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.streaming.checkpointLocation", str(tmp_path_factory.mktemp("checkpoints")))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
