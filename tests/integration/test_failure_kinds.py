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
        "delivery", f"org.apache.kafka.common.errors.RecordTooLargeException: {why}; the target topic's "
        "max.message.bytes (or the target broker's message.max.bytes) is below the record's size")


def test_a_record_too_large_for_the_producer_is_named_with_its_place_and_the_setting_to_raise(jvm):
    """A source topic that takes records over 1 MiB (its max.message.bytes, which mirrord copies) and Kafka's
    default max.request.size: the exit line named neither the record nor the file ("streaming query failed:
    …RecordTooLargeException: The message is 1500090 bytes …"), seen on real brokers. mirrord's writer wraps the
    refusal with the record's place (io.mirrord.sink.StreamSends), and that line is the one kept."""
    why = ("The message is 1500090 bytes when serialized which is larger than 1048576, which is the value of the "
           "max.request.size configuration.")
    refused = jvm.org.apache.kafka.common.errors.RecordTooLargeException(why)
    place = f"record 2 of big-0 not delivered to big: {refused.toString()}"
    wrapped = jvm.org.apache.spark.SparkException(f"Job aborted: {place}", jvm.java.util.concurrent.ExecutionException(
        jvm.org.apache.kafka.common.KafkaException(place, refused)))
    assert failure(StoppedQuery(wrapped)) == (
        "delivery", f"{place}; raise max.request.size in producer.properties above the record's size")
    # a wrapper that adds nothing to the cause's text gives way to the cause
    unwrapped = jvm.org.apache.kafka.common.KafkaException("Failed to construct kafka producer",
                                                             jvm.org.apache.kafka.common.config.ConfigException("bad"))
    assert failure(StoppedQuery(unwrapped)) == ("delivery", "org.apache.kafka.common.config.ConfigException: bad")


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
