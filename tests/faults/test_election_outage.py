"""With leader election (docs/decisions.md §6), a target outage longer than the election's session lapses the
host's membership; a restart of the target's broker (its group coordinator) meanwhile reloads the election's group
with the lapsed member in it. Mirroring resumes within seconds of the target's return all the same, not a session
later (tests/faults/test_outages.py holds 2 s without election)."""

from __future__ import annotations

import time

from tests.harness.mirrord import Mirrord, write_flow
from tests.harness.records import Trickle, count, create_topic, wait_until
from tests.integration.test_resilience import assert_nothing_lost, wait_all_mirrored

SESSION = 10  # seconds: the election's leader.session.timeout.ms in this test
ELECTED_OUTAGE = 2 * SESSION  # longer than the session, so the host's membership lapses on both sides
# Seconds from the target's return to the next record. A host that waited for its lapsed member to expire would copy
# a session after the coordinator reloaded the group at the earliest (7.4 s at a 6 s session, before the member was
# taken out); taken out, 0.9-1.6 s alone, 3.1-5.4 s beside make test's other lanes (a bound of 5 s at a 6 s session
# failed once at 5.4 s); with the member left in (the take-out disabled), 10.6 s alone at this 10 s session. The bound
# sits between the two: what the test tells apart is the wait for the old member, not the machine's load. Issue 31's
# bar is 2 s, on a quiet machine.
COPYING_AGAIN = 0.8 * SESSION


def test_with_leader_election_a_target_whose_coordinator_restarted_is_mirrored_again_within_seconds(
        bounced_pair, unique, tmp_path):
    """A single host elected through the target's group (docs/decisions.md §6) loses its session while the target is
    away. The target's restart reloads the election's group with the lapsed member in it; the host rejoins under a
    new member id, and the coordinator would wait a whole session for the old one: the host leaves its old member
    itself (io.mirrord.fencing.LapsedMembers), so it holds the flow and copies again within seconds."""
    source, target = bounced_pair
    topic, group = unique("elected-outage"), unique("elected-outage-group")
    create_topic(source.bootstrap, topic, 2)
    config = write_flow(tmp_path / "flow", source.bootstrap, target.bootstrap, topic, group=group,
                        conf={"leader.session.timeout.ms": str(SESSION * 1000)})
    daemon = Mirrord(config).start()
    trickle = Trickle(source.bootstrap, topic, 2, total=50 * (ELECTED_OUTAGE + 120), rate=50)
    try:
        daemon.wait_ready()
        trickle.start()
        wait_until(lambda: count(target.bootstrap, topic) > 100, 60, "mirrord copying before the outage")
        target.stop()
        wait_until(lambda: "its session lapsed" in daemon.output(), ELECTED_OUTAGE, "the election's session lapsing")
        time.sleep(SESSION)  # an outage, not a blip: it lasts on past the lapse
        target.start()
        returned = time.monotonic()
        floor = count(target.bootstrap, topic)
        wait_until(lambda: count(target.bootstrap, topic) > floor, 60,
                   "mirrord copying again after the target's return", interval=0.1)
        copying = time.monotonic() - returned
        print(f"elected host: copying again {copying:.1f}s after the target's return")
        assert copying <= COPYING_AGAIN, daemon.output()[-3000:]
        assert "took this host's lapsed member out of election group" in daemon.output()
        trickle.stop()
        assert not trickle.errors, trickle.errors[:3]
        wait_all_mirrored(source.bootstrap, topic, group)
        assert_nothing_lost(source.bootstrap, target.bootstrap, topic)
        assert daemon.stop() == 0
    finally:
        trickle.stop()
        daemon.stop()
