"""Exactly once under the default leader election: the producer waits `max.block.ms` (1 s) for a transaction's
commit to be answered. A target stalled past that, just as a commit is asked for, is an outage waited out, not a
failed transaction: the commit is asked again while the lease holds (docs/decisions.md §12). No query restart,
and a read_committed reader finds every record once."""

from __future__ import annotations

import os
import signal
import time

from tests.faults.test_exactly_once import assert_exactly_once
from tests.harness.mirrord import Mirrord, write_flow
from tests.harness.records import Trickle, create_topic
from tests.integration.test_resilience import wait_all_mirrored

PAUSE = 2.5  # seconds the target's broker is stopped: past the 1 s max.block.ms, within the 5 s lease


def test_a_commit_the_stalled_target_answers_late_is_waited_for_without_a_restart(bounced_pair, unique, tmp_path):
    source, target = bounced_pair
    topic, group = unique("stalled-commit"), unique("stalled-commit-group")
    create_topic(source.bootstrap, topic, 4)
    config = write_flow(tmp_path / "flow", source.bootstrap, target.bootstrap, topic, group=group,
                        conf={"delivery": "exactly-once"})
    release = tmp_path / "release"
    # the JVM holds at its first commit of a transaction with records, until the target is stopped
    daemon = Mirrord(config, env={"MIRRORD_TEST_HOLD_AT": "commit", "MIRRORD_TEST_HOLD_UNTIL": str(release)})
    trickle = Trickle(source.bootstrap, topic, 4, total=4_000, rate=500)
    daemon.start()
    try:
        daemon.wait_ready()
        trickle.start()
        daemon.wait_logged("mirrord test hold: commit", 60)
        os.kill(target.process.pid, signal.SIGSTOP)
        try:
            release.touch()  # the commit is asked for now, of a stopped target
            time.sleep(PAUSE)
        finally:
            os.kill(target.process.pid, signal.SIGCONT)
        trickle.join()
        assert not trickle.errors, trickle.errors[:3]
        wait_all_mirrored(source.bootstrap, topic, group)
        output = daemon.output()
        assert "the target has not answered the commit for" in output, output[-3000:]
        assert "streaming query stopped" not in output, output[-3000:]
        assert assert_exactly_once(source.bootstrap, target.bootstrap, topic) == 4_000
        assert daemon.stop() == 0
    finally:
        trickle.stop()
        daemon.stop()
