"""A target behind a slow link (a WAN between regions) under the default leader election, where a record has 3 s to
be acknowledged: the backlog of a topic takes longer than that to cross. A stream's bound on the bytes awaiting
acknowledgement follows what the target acknowledges in a sixth of the 3 s, from a small start, so the backlog
waits in the source, not in the producer, where it would expire and restart the query, again and again
(docs/decisions.md §2; following a third, measured by the bytes ahead of a timed record, it expired a batch in one
CI run). Every record once, in order, no restart. mirrord runs in a network namespace of its own and
reaches the target through a relay that carries 2 MiB a second towards it (tests/harness/netns.py)."""

from __future__ import annotations

import time

from tests.faults.test_partition import _port
from tests.harness.mirrord import Mirrord, write_flow
from tests.harness.netns import Namespace
from tests.harness.records import create_topic, produce
from tests.integration.test_resilience import assert_nothing_lost, wait_all_mirrored

PARTITIONS = 4
RECORDS = 24_000  # of 1 KiB: 12 s over the link; the bound before this test let 12 MiB a stream await it
LINK = 2 << 20  # bytes a second towards the target


def test_a_backlog_slower_to_cross_than_the_delivery_timeout_waits_in_the_source_not_in_the_producer(
        bounced_pair, unique, tmp_path):
    source, target = bounced_pair
    topic, group = unique("slow-link"), unique("slow-link-group")
    create_topic(source.bootstrap, topic, PARTITIONS)
    now = int(time.time() * 1000)  # within the brokers' 7-day retention
    produce(source.bootstrap, topic, [
        {"partition": i % PARTITIONS, "key": f"k{i}".encode(), "value": i.to_bytes(4, "big") * 256,
         "headers": [("h", str(i).encode())], "timestamp": now - RECORDS + i} for i in range(RECORDS)])
    ns = Namespace()
    ns.relay(_port(source.bootstrap))
    ns.relay(_port(target.bootstrap), rate=LINK)
    daemon = Mirrord(write_flow(tmp_path / "flow", source.bootstrap, target.bootstrap, topic, group=group,
                                metrics=False), prefix=tuple(ns.command()))
    try:
        daemon.start().wait_ready()
        wait_all_mirrored(source.bootstrap, topic, group, timeout=240)
        output = daemon.output()
        assert "records expired" not in output, output[-3000:]
        assert "streaming query stopped" not in output, output[-3000:]
        assert assert_nothing_lost(source.bootstrap, target.bootstrap, topic) == 0, "records copied twice"
        assert "the target acknowledges slowly" in output, output[-3000:]  # the journal says why the lag grows
        assert daemon.stop() == 0
    finally:
        daemon.stop()
        ns.close()
