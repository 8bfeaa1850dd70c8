"""Which broker errors a broker call waits out (admin.retrying) and which it raises at once."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrord.kafka.admin import retrying


def failing_then(code: int, times: int):
    calls = []

    def call() -> str:
        calls.append(code)
        if len(calls) <= times:
            raise KafkaException(KafkaError(code))
        return "answered"
    return call, calls


@pytest.mark.parametrize("code", [KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH,
                                  KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.LEADER_NOT_AVAILABLE,
                                  KafkaError.COORDINATOR_LOAD_IN_PROGRESS])
def test_an_error_kafka_calls_retriable_is_waited_out(code):
    """`make test` saw list_offsets of a target topic just created fail with UNKNOWN_LEADER_EPOCH ("Leader epoch is
    newer than broker epoch"): Kafka's UnknownLeaderEpochException is retriable, librdkafka's future did not say so."""
    call, calls = failing_then(code, 2)
    assert retrying(call, timeout=10) == "answered" and len(calls) == 3


@pytest.mark.parametrize("code", [KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED])
def test_an_answer_that_will_not_change_is_raised_at_once(code):
    call, calls = failing_then(code, 1)
    with pytest.raises(KafkaException):
        retrying(call, timeout=10)
    assert len(calls) == 1
