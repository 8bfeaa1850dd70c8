"""`make test`: the suite in five pytest processes, two phases of lanes that run at once, so that its minutes of
waiting overlap its work. Most tests wait far more than they compute (a mirrord start, a session timeout, a
stream), so a lane alone keeps about one core of two busy.

1. The integration tests (the live lane), beside the tests that hold no time bound a busy machine could break
   (unit tests, the bench's harness, the packages and the units in containers, a Spark standalone cluster's
   flow).
2. The fault tests (kill -9 campaigns, a host cut off, brokers bounced) and the upgrades in place (a release's
   state started, no time bound), beside the tests that mostly wait: outages that last minutes by design, four
   and a half of them, then the signals and reloads, then a flow's identity (regions, upgrades); and beside
   those, the tests that wait on a broker's clock (a group's offsets expiring) or hold no time bound
   (MirrorMaker 1's command line and the shipped files, a replication cycle, ACLs, an alert firing in a real
   Prometheus), and a target outage under leader election (one mirrord, a minute, its 2 s bound on the spare
   core). The fault tests' JVMs run sustained streams and catch-ups: beside the integration tests the kill
   campaign took 505 s instead of 300 s, so they have a phase of their own, shared only with lanes that leave
   them a core (measured: the first phase kept 1.6 of the two cores busy, the second 1.4 before its third lane).
   `make test` kills 4 times at least once and 2 + 4 times per trigger mode exactly once;
   MIRRORD_KILLS=10 MIRRORD_EOS_KILLS=10 run the whole campaigns.

Measured 2026-11-30 from a fresh worktree (setup included): 31:43, the first phase 15:04 (live) and 16:43 (side,
the longer by the bench's harness), the second 13:11, 14:01 and 14:05; from a fresh machine (Debian's packages and
the containers' root built first) 39:23, the side lane 22:30. Moving the bench's harness to a fourth lane of the
second phase saved 34 s and failed it there once (a transform's backfill past its 60 s run timeout): not kept.
Later that day, the JVM tests run once (not also by `make jars`): 29:27, the first phase 13:56 and 15:26, the
second 11:16, 12:22 and 13:08.

Then, to even the phases' lanes out (the first phase's side lane was 1:30 longer than its live lane, the second's
later lane 1:50 longer than its fault tests): the unit suite's property tests moved to the first phase's live lane
and the upgrades in place to the fault tests' lane. Measured the same morning on a slower machine (the waits lane,
unchanged, took 14:19 against 12:22): 31:02, the first phase 15:10 and 15:44, the second 14:27, 14:19 and 13:53;
an hour later 32:14 (15:37 and 16:24; 14:59, 14:45 and 13:46): balanced, and over 30 minutes on that machine.
On 2026-11-30 at 09:20 UTC, the same lanes: 31:55 (15:52 and 16:53; 14:02, 13:58 and 13:09): the first phase
sets the time. At 11:28 a third lane in the first phase (two hosts of a flow, the units in containers, the unit
suite's Spark checks: 9:18) with the JVM's tests beside it: 16:18 and 16:12, the first phase 35 s shorter, as its
two cores were full (the live lane took 18 % longer than its tests had, the side lane 22 %), and a JVM test that
times its own thread's sleeps failed under that load: not kept. The suite is bound by its CPU, not its lanes.
At 12:17, the two lanes again: 31:40 (16:22 and 16:56; 13:52, 13:36 and 13:18).
On 2026-11-30 at 14:28, at 857bc2c (a 24 s test more in the live lane, the kill campaigns killing Spark's JVM alone
every other time): 34:50 (18:41 and 18:26; 15:03, 14:17 and 12:58), on a machine that ran the side lane's tests,
unchanged, 9 % slower than the day before and the unit suite's property test 58 s against 34: over 30 minutes.
On 2026-11-30 at 17:24, at a678e19 (an idle stream rests between fetches, docs/decisions.md §9: each mirrord the
tests start, idle most of its life, and the source broker it asks used about half the CPU they had for its empty
fetches): 29:22, all passed (16:00 and 15:08; 12:27, 12:28 and 11:40), every lane 5-9 % shorter than at 529c26c.
At 18:19, at ba2fc46 (the bench's smoke test with its idle windows): 29:43 (16:12 and 15:59; 12:02, 12:36 and 11:18).
At 20:55, at e748dc5 (an idle stream waits on a second consumer's held fetch): 32:24, all
passed; the first phase shorter (16:09 and 15:43), the second longer (15:26, 14:30 and 14:11), the kill campaigns
most of it (the exactly-once ones 221 and 198 s against 170 and 134, at least once's 149 against 85): over 30
minutes. The at-least-once campaign alone right after: 62.6 s (85 s in its lane at ba2fc46), so the lanes' hour was
busier, not the campaign slower; the margin under 30 minutes is thin on this machine either way.

Each lane has its own brokers and temporary directory; a phase's first lane's output is shown as it runs, the
others' is kept in files and shown after it. Where the time goes, per test:
`python -m tests.lanes -p tests.harness.cputime` (tests/harness/cputime.py).

The exit status is the worst of the five (pytest's 5, nothing selected, counts as success). Arguments go to
every process; with test paths among them, one pytest runs them as given.

    python -m tests.lanes [PYTEST_ARGS...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WAITS = ["tests/faults/test_outages.py", "tests/faults/test_signals.py",
         "tests/integration/test_identity.py"]  # four mirrord starts and two brokers, mostly waiting
# tests that wait on a broker's clock, start a release's state or hold no time bound, left to the second phase's
# spare core
LATER = ["tests/integration/test_positions.py::"
         "test_an_idle_partitions_committed_position_outlives_the_source_groups_retention",
         "tests/integration/test_positions.py::"
         "test_a_topic_a_stream_took_up_and_that_was_recreated_under_it_is_copied_whole",
         "tests/integration/test_claims.py", "tests/integration/test_cycle.py",
         "tests/integration/test_acls.py", "tests/observability/test_prometheus_live.py",
         "tests/faults/test_election_outage.py", "tests/faults/test_full_pool.py", "tests/faults/test_slow_link.py",
         "tests/faults/test_stalled_commit.py",
         "tests/faults/test_exactly_once.py::test_a_host_frozen_mid_transaction_is_fenced_by_the_broker_when_the_layout_"
         "changed"]
# property tests of the unit suite, run by the live lane of the first phase: they only compute, and the side lane
# is the longer of the two without them
PROPERTIES = ["tests/unit/test_offsets_property.py", "tests/unit/test_config_faults_property.py"]
PHASES = [
    ("integration", ["tests/integration", "tests/observability/test_rules_and_dashboard.py", *PROPERTIES],
     [("side", ["tests/unit", "tests/bench", "tests/system", "tests/integration/test_spark_cluster.py",
                "tests/packaging"])]),
    # the upgrades in place hold no time bound: beside the fault tests, where the later lane was the longest
    ("faults", ["tests/faults", "tests/integration/test_upgrade.py"], [("waits", WAITS), ("later", LATER)]),
]
NOTHING_SELECTED = 5


def main(args: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", "-q"]
    if any(not a.startswith("-") and (ROOT / a.split("::")[0]).exists() for a in args):
        return subprocess.call([*pytest, *args], cwd=ROOT)
    statuses = []
    for live, live_paths, lanes in PHASES:
        with tempfile.TemporaryDirectory(prefix=f"mirrord-{live}-") as base:
            logs = [tempfile.NamedTemporaryFile("w+", prefix=f"mirrord-{kept}-", suffix=".log") for kept, _ in lanes]
            print(f"\n===== {live}: {' '.join(live_paths)} =====", flush=True)
            others = [subprocess.Popen([*pytest, "-p", "no:cacheprovider", f"--basetemp={base}/{kept}",
                                        *_left_out(kept_paths), *_junit(args, kept), *kept_paths],
                                       cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
                      for (kept, kept_paths), log in zip(lanes, logs, strict=True)]
            try:
                statuses.append(subprocess.call([*pytest, *_left_out(live_paths), *_junit(args, live), *live_paths],
                                                cwd=ROOT))
            finally:
                statuses.extend(other.wait() for other in others)
            for (kept, kept_paths), log in zip(lanes, logs, strict=True):
                log.seek(0)
                print(f"\n===== {kept}: {' '.join(kept_paths)} =====", flush=True)
                sys.stdout.write(log.read())
                log.close()
    statuses = [0 if s == NOTHING_SELECTED else s for s in statuses]
    return next((s for s in statuses if s != 0), 0)


def _left_out(own: list[str]) -> list[str]:
    """A lane's arguments that leave out the files and tests another lane names: no test runs twice."""
    named = [p for _, live_paths, lanes in PHASES for p in [*live_paths, *(q for _, paths in lanes for q in paths)]
             if "::" in p or p.endswith(".py")]
    return [f"--deselect={p}" if "::" in p else f"--ignore={p}" for p in named if p not in own]


def _junit(args: list[str], lane: str) -> list[str]:
    """The arguments, a JUnit report's name given a suffix of the lane's (each pytest writes its own)."""
    return [a.replace(".xml", f"-{lane}.xml") if a.startswith("--junitxml") else a for a in args]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
