"""A producer.properties that sizes the writer's pool itself, too small for a stream's partitions, is named in the
journal at the query's start, with the value that fits (docs/decisions.md §2)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

from mirrord.spark.pipeline import warn_pool_too_small


def flow(**props: str) -> SimpleNamespace:
    producer = SimpleNamespace(properties=props, path=Path("/etc/mirrord/producer.properties"))
    return SimpleNamespace(settings=SimpleNamespace(producer=producer),
                           target_properties={"batch.size": "65536", "linger.ms": "5", **props})


def test_a_pool_of_fewer_batches_than_a_streams_partitions_is_named_with_the_value_that_fits(caplog):
    with caplog.at_level(logging.WARNING, "mirrord.spark.pipeline"):
        warn_pool_too_small(flow(**{"batch.size": "262144"}), streams=2, partitions=480)
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("producer.properties: buffer.memory 33554432 holds 128 batches of batch.size 262144"), line
    assert "each of the 2 streams writes 240 partitions" in line and "Raise buffer.memory to 251658240" in line
    assert "or remove batch.size so that mirrord sizes the pool" in line


def test_a_pool_that_holds_a_batch_for_each_partition_says_nothing(caplog):
    with caplog.at_level(logging.WARNING, "mirrord.spark.pipeline"):
        warn_pool_too_small(flow(**{"batch.size": "262144"}), streams=2, partitions=12)
        warn_pool_too_small(flow(**{"batch.size": "262144", "buffer.memory": "268435456"}), streams=2, partitions=480)
        warn_pool_too_small(flow(**{"linger.ms": "10"}), streams=2, partitions=480)  # 512 batches of 64 KiB
    assert caplog.records == []
