"""A producer.properties whose pool (`buffer.memory`) holds fewer batches than the partitions a stream writes, while
the target is slow to acknowledge: the pool stays full past `max.block.ms` (1 s under the default election), and
Kafka's producer refuses the next record before appending it. Likewise a first record for a topic the producer has
not sent to yet while the target is stopped: no metadata within `max.block.ms`, refused before the append. The stream
waits and sends the record again, in its place: no query restart, every record once and in order
(docs/decisions.md §2)."""

from __future__ import annotations

import os
import signal
import time

from tests.harness.mirrord import Mirrord, metric_value, write_flow
from tests.harness.records import Trickle, count, create_topic, produce, topic_partitions, wait_until
from tests.integration.test_resilience import assert_nothing_lost, wait_all_mirrored

PAUSE = 2.5  # seconds the target's broker is stopped: past the 1 s max.block.ms, within the 3 s delivery timeout
FULL = "buffer.memory stayed full of batches for max.block.ms"
REFUSED = "the producer refused a record before sending it"


def test_a_pool_full_past_max_block_ms_is_waited_out_without_a_restart_or_a_duplicate(bounced_pair, unique, tmp_path):
    source, target = bounced_pair
    topic, group = unique("full-pool"), unique("full-pool-group")
    quiets = [f"{topic}-quiet{n}" for n in range(3)]  # no record until a later pause: no metadata in the producer
    create_topic(source.bootstrap, topic, 8)
    for quiet in quiets:
        create_topic(source.bootstrap, quiet, 1)
    config = write_flow(tmp_path / "flow", source.bootstrap, target.bootstrap, f"{topic}|{topic}-quiet[0-9]",
                        group=group,
                        # four batches of 256 KiB for a stream's four partitions: those in flight hold them
                        producer={"batch.size": "262144", "buffer.memory": "1048576"})
    daemon = Mirrord(config).start()
    trickle = Trickle(source.bootstrap, topic, 8, total=10_000, rate=500)  # on through three pauses
    try:
        daemon.wait_ready()
        # every topic the writer sends to is known to its producer before the pause: a first send's metadata wait
        # is another refusal, not this test's (this flow's own heartbeats: the target's topic may hold another's);
        # waited for before the trickle, which must still run when the target pauses
        wait_until(lambda: metric_value(daemon.metrics(), "mirrord_records_total", topic="heartbeats"), 60,
                   "this flow's heartbeats copied")
        trickle.start()
        wait_until(lambda: count(target.bootstrap, topic) > 500, 60, "mirrord copying")
        wait_until(lambda: all(topic_partitions(target.bootstrap, q) == 1 for q in quiets), 60,
                   "the quiet topics created on the target")
        # Nothing acknowledged: the batches in flight keep the pool. A pause that falls on the end of one of the
        # query's 5 s batches may refuse nothing (the batch's end waits for every acknowledgement, sending nothing:
        # seen once under make test's load), so up to three, until a refusal was waited out.
        for _ in range(3):
            pause(target)
            if refused(daemon, FULL):
                break
        trickle.join()
        wait_all_mirrored(source.bootstrap, topic, group)
        assert FULL in daemon.output(), daemon.output()[-3000:]

        # A first record for a quiet topic while the target is stopped. It may reach the producer only once the
        # target is back (seen once under make test's load: no refusal, every record copied once; a batch's end in
        # the pause, as above, would do it), so up to three quiet topics, until a refusal was waited out. Timestamps
        # of a minute ago: records older than the topic's retention (7 days) go at the broker's next retention check,
        # and the source could not be read back.
        stamp = int(time.time() * 1000) - 60_000
        copied = []
        for quiet in quiets:
            pause(target, lambda q=quiet: produce(source.bootstrap, q, [
                {"partition": 0, "key": f"k{i}".encode(), "value": f"v{i}".encode(), "headers": [("h", b"x")],
                 "timestamp": stamp + i} for i in range(20)]))
            wait_all_mirrored(source.bootstrap, quiet, group)
            copied.append(quiet)
            if refused(daemon, f"{REFUSED} (Topic {quiet} not present in metadata"):
                break
        output = daemon.output()
        assert any(f"{REFUSED} (Topic {q} not present in metadata" in output for q in copied), output[-3000:]
        assert "streaming query stopped" not in output, output[-3000:]
        for mirrored in [topic, *copied]:
            assert assert_nothing_lost(source.bootstrap, target.bootstrap, mirrored) == 0, f"{mirrored}: copied twice"
        assert daemon.stop() == 0
    finally:
        trickle.stop()
        daemon.stop()


def refused(daemon: Mirrord, line: str) -> bool:
    """Whether the journal has `line` within a second (the JVM's log reaches it a moment after the refusal)."""
    try:
        wait_until(lambda: line in daemon.output(), 1.0, line)
    except AssertionError:
        return False
    return True


def pause(target, meanwhile=lambda: None) -> None:
    """The target's broker stopped for PAUSE seconds; `meanwhile` runs once it is."""
    os.kill(target.process.pid, signal.SIGSTOP)
    try:
        meanwhile()
        time.sleep(PAUSE)
    finally:
        os.kill(target.process.pid, signal.SIGCONT)
