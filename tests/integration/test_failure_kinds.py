"""Why a streaming query stopped, judged on real Java exceptions (py4j's is_instance_of, not class names)."""

from __future__ import annotations

import pytest

from mirrord.jars import connector_jars
from mirrord.spark.session import failure


class _Optional:
    def __init__(self, value):
        self.value = value

    def isEmpty(self) -> bool:  # noqa: N802 - java.util.Optional's name
        return self.value is None

    def get(self):
        return self.value


class StoppedQuery:
    """What `failure` reads of a stopped StreamingQuery: isActive and _jsq.exception()."""

    isActive = False  # noqa: N815 - pyspark's name

    def __init__(self, exception):
        self._jsq = type("JavaQuery", (), {"exception": lambda _: _Optional(exception)})()


@pytest.fixture(scope="module")
def jvm():
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway(SparkConf().set("spark.driver.extraClassPath", ":".join(connector_jars())))
    previous, SparkContext._gateway = SparkContext._gateway, gateway
    try:
        yield gateway.jvm
    finally:
        SparkContext._gateway = previous
        gateway.shutdown()
        gateway.proc.stdin.close()
        gateway.proc.wait(30)


def test_a_kafka_client_error_anywhere_in_the_causes_is_a_delivery_failure(jvm):
    why = "The message is 2000000 bytes when serialized which is larger than 1048576"
    refused = jvm.org.apache.kafka.common.errors.RecordTooLargeException(why)
    wrapped = jvm.org.apache.spark.SparkException("Job aborted", jvm.java.util.concurrent.ExecutionException(refused))
    assert failure(StoppedQuery(wrapped)) == (
        "delivery", f"org.apache.kafka.common.errors.RecordTooLargeException: {why}")


def test_a_kafka_client_timeout_anywhere_in_the_causes_is_a_timeout(jvm):
    """A cluster that did not answer within the client's timeouts (bounded by the lease): an outage, not a
    refused send (docs/decisions.md §5)."""
    why = "Expiring 3 record(s) for t-0: 3000 ms has passed since batch creation"
    expired = jvm.org.apache.kafka.common.errors.TimeoutException(why)
    wrapped = jvm.org.apache.spark.SparkException("Job aborted", jvm.java.util.concurrent.ExecutionException(expired))
    assert failure(StoppedQuery(wrapped)) == ("timeout", f"org.apache.kafka.common.errors.TimeoutException: {why}")


def test_a_send_refused_because_the_lease_lapsed_is_a_lapse(jvm):
    """The election could not be confirmed (the target away): an outage the probe may not have seen yet, not a
    reason to end mirrord (docs/decisions.md §6)."""
    why = "not sent to heartbeats: this host's lease lapsed (fenced)"
    refused = jvm.io.mirrord.fencing.FencedError(why)
    wrapped = jvm.org.apache.spark.SparkException("Job aborted", jvm.java.util.concurrent.ExecutionException(refused))
    assert failure(StoppedQuery(wrapped)) == ("lapsed", f"io.mirrord.fencing.FencedError: {why}")


def test_other_errors_are_query_failures(jvm):
    assert failure(StoppedQuery(jvm.java.lang.IllegalStateException("boom"))) == (
        "query", "java.lang.IllegalStateException: boom")
    assert failure(StoppedQuery(None)) == ("query", "query stopped")
