"""`make test`: the suite in four pytest processes, two phases of two lanes at once, so that its minutes of
waiting overlap its work. Most tests wait far more than they compute (a mirrord start, a session timeout, a
stream), so a lane alone keeps about one core of two busy.

1. The integration tests (the live lane), beside the tests that hold no time bound a busy machine could break
   (unit tests, the bench's harness, the packages and the units in containers, the alerts firing, a Spark
   standalone cluster's flow, the upgrades in place).
2. The fault tests (kill -9 campaigns, a host cut off, brokers bounced), beside the tests that mostly wait:
   outages that last minutes by design, four and a half of them, then the signals and reloads, then a flow's
   identity (regions, upgrades). The fault
   tests' JVMs run sustained streams and catch-ups: beside the integration tests the kill campaign took 505 s
   instead of 300 s, so they have a phase of their own, shared only with lanes that leave them a core.
   `make test` kills 4 times at least once and 2 + 4 times per trigger mode exactly once;
   MIRRORD_KILLS=10 MIRRORD_EOS_KILLS=10 run the whole campaigns.

Each lane has its own brokers and temporary directory; the first lane's output is shown as it runs, the other
lane's is kept in a file and shown after it. Where the time goes, per test:
`python -m tests.lanes -p tests.harness.cputime` (tests/harness/cputime.py).

The exit status is the worst of the four (pytest's 5, nothing selected, counts as success). Arguments go to
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
PHASES = [
    ("integration", ["tests/integration", "tests/observability/test_rules_and_dashboard.py"],
     "side", ["tests/unit", "tests/observability/test_prometheus_live.py", "tests/bench", "tests/system",
              "tests/integration/test_spark_cluster.py", "tests/packaging",
              "tests/integration/test_upgrade.py"]),
    ("faults", ["tests/faults"], "waits", WAITS),
]
NOTHING_SELECTED = 5


def main(args: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", "-q"]
    if any(not a.startswith("-") and (ROOT / a.split("::")[0]).exists() for a in args):
        return subprocess.call([*pytest, *args], cwd=ROOT)
    statuses = []
    for live, live_paths, kept, kept_paths in PHASES:
        # a live lane never runs a file a kept lane of any phase runs
        ignore = [f"--ignore={p}" for *_, paths in PHASES for p in paths if p.endswith(".py")]
        with tempfile.TemporaryDirectory(prefix=f"mirrord-{kept}-") as base, \
                tempfile.NamedTemporaryFile("w+", prefix=f"mirrord-{kept}-", suffix=".log") as log:
            print(f"\n===== {live}: {' '.join(live_paths)} =====", flush=True)
            other = subprocess.Popen([*pytest, "-p", "no:cacheprovider", f"--basetemp={base}/t", *_junit(args, kept),
                                      *kept_paths], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                     env=os.environ.copy())
            try:
                statuses.append(subprocess.call([*pytest, *ignore, *_junit(args, live), *live_paths], cwd=ROOT))
            finally:
                statuses.append(other.wait())
            log.seek(0)
            print(f"\n===== {kept}: {' '.join(kept_paths)} =====", flush=True)
            sys.stdout.write(log.read())
    statuses = [0 if s == NOTHING_SELECTED else s for s in statuses]
    return next((s for s in statuses if s != 0), 0)


def _junit(args: list[str], lane: str) -> list[str]:
    """The arguments, a JUnit report's name given a suffix of the lane's (each pytest writes its own)."""
    return [a.replace(".xml", f"-{lane}.xml") if a.startswith("--junitxml") else a for a in args]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
