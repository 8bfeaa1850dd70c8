"""One real source and one real target Kafka broker for the whole test session."""

from __future__ import annotations

import itertools
import os

import pytest

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
