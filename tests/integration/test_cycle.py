"""A replication cycle, end to end: the identity policy both ways between two clusters.

These two clusters are the test's own: the loop copies every heartbeat back and forth, and a later
flow on the session's pair with the same aliases would find its own heartbeat on its source."""

from __future__ import annotations

import pytest

from tests.harness.kafka import start_pair
from tests.harness.mirrord import Mirrord, metric_value, write_flow
from tests.harness.records import create_topic, wait_until


@pytest.fixture(scope="module")
def looping_pair(tmp_path_factory):
    a, b = start_pair(tmp_path_factory.mktemp("cycle"))
    yield a, b
    a.destroy()
    b.destroy()


def test_an_identity_pair_both_ways_is_reported_as_a_replication_cycle(looping_pair, unique, tmp_path):
    """The identity policy cannot tell a copy from an original: A→B plus B→A loops. mirrord says so: each
    flow finds its own heartbeat, written only to its target, back on its source."""
    source, target = looping_pair
    topic = unique("cycle")
    create_topic(source.bootstrap, topic, 1)
    pair = [Mirrord(write_flow(tmp_path / name, a.bootstrap, b.bootstrap, topic, group=unique(f"cycle-{name}"),
                               conf={"flow": name, "source.alias": x, "target.alias": y,
                                     "leader.election.enabled": "false"}))
            for name, a, b, x, y in (("a-to-b", source, target, "A", "B"), ("b-to-a", target, source, "B", "A"))]
    try:
        for daemon in pair:
            daemon.start().wait_ready()
        for daemon in pair:
            wait_until(lambda d=daemon: metric_value(d.metrics(), "mirrord_cycle_detected") == 1, 120,
                       f"{daemon.config.parent.name} reporting the cycle")
            assert "replication cycle" in daemon.output()
    finally:
        for daemon in pair:
            daemon.stop()
