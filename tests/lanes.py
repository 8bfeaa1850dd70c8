"""`make test`: the suite in three pytest processes, two at once and then one alone, so that its minutes of
waiting overlap its work and its CPU-hungry fault tests get both cores.

1. Two lanes at once. The side lane: the tests that wait (outages that last minutes by design, four and a
   half of them; an alert's `for:` window), then the ones that hold no time bound a busy machine could break
   (unit tests, the bench's harness, the packages in containers). The main lane beside it: the integration
   and system tests. Each lane has its own brokers and temporary directory; the side lane's output is kept
   in a file and printed after the main lane's.
2. Alone: the fault tests (kill -9 campaigns, signals, a host cut off), whose JVMs run sustained streams and
   catch-ups: beside another lane the kill campaign took 505 s instead of 300 s. `make test` kills 4 times
   at least once and 2 + 4 times per trigger mode exactly once; MIRRORD_KILLS=10 MIRRORD_EOS_KILLS=10 run the
   whole campaigns.

Where the time goes, per test: `python -m tests.lanes -p tests.harness.cputime` (tests/harness/cputime.py).

The exit status is the worst of the three (pytest's 5, nothing selected, counts as success). Arguments go to
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
SIDE = ["tests/faults/test_outages.py", "tests/observability/test_prometheus_live.py", "tests/unit", "tests/bench",
        "tests/packaging"]
MAIN = ["tests/observability", "tests/system", "tests/integration"]
ALONE = ["tests/faults"]
NOTHING_SELECTED = 5


def main(args: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", "-q"]
    if any(not a.startswith("-") and (ROOT / a.split("::")[0]).exists() for a in args):
        return subprocess.call([*pytest, *args], cwd=ROOT)
    ignore_side = [f"--ignore={p}" for p in SIDE if p.endswith(".py")]
    with tempfile.TemporaryDirectory(prefix="mirrord-side-") as base, \
            tempfile.NamedTemporaryFile("w+", prefix="mirrord-side-", suffix=".log") as log:
        side = subprocess.Popen([*pytest, "-p", "no:cacheprovider", f"--basetemp={base}/t", *_junit(args, "side"),
                                 *SIDE], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
        try:
            main_status = subprocess.call([*pytest, *ignore_side, *args, *MAIN], cwd=ROOT)
        finally:
            side_status = side.wait()
        log.seek(0)
        print(f"\n===== side lane: {' '.join(SIDE)} =====", flush=True)
        sys.stdout.write(log.read())
    print(f"\n===== alone: {' '.join(ALONE)} =====", flush=True)
    alone_status = subprocess.call([*pytest, *ignore_side, *_junit(args, "alone"), *ALONE], cwd=ROOT)
    statuses = [0 if s == NOTHING_SELECTED else s for s in (main_status, side_status, alone_status)]
    return next((s for s in statuses if s != 0), 0)


def _junit(args: list[str], lane: str) -> list[str]:
    """The arguments, a JUnit report's name given a suffix of the lane's (each pytest writes its own)."""
    return [a.replace(".xml", f"-{lane}.xml") if a.startswith("--junitxml") else a for a in args]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
