"""`make test`: the suite in two pytest processes at once, so that its minutes of waiting overlap its work.

The side lane waits: outages that last minutes by design (four and a half of them), an alert's `for:`
window. It runs with its own brokers and temporary
directory beside the main lane, its output kept in a file and printed after the main lane's; the exit status
is the worse of the two (pytest's 5, nothing selected, counts as success). Arguments go to both lanes; with
test paths among them, one pytest runs them as given.

    python -m tests.lanes [PYTEST_ARGS...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Only tests that wait and hold no bound a busy machine breaks: on two cores, the packaging, systemd and partition
# tests beside the rest saturated both (run queue 13-19) and the kill campaign and the partition test failed.
SIDE = ["tests/faults/test_outages.py", "tests/observability/test_prometheus_live.py"]
# The main lane's order: while the side lane runs, its lighter tests (unit tests use one core); the kill campaign
# and the bench, which want both cores, at the end (beside the side lane the campaign took 505 s, alone 300 s).
MAIN = ["tests/unit", "tests/observability", "tests/system", "tests/integration", "tests/packaging", "tests/bench",
        "tests/faults"]
NOTHING_SELECTED = 5


def main(args: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", "-q"]
    if any(not a.startswith("-") and (ROOT / a.split("::")[0]).exists() for a in args):
        return subprocess.call([*pytest, *args], cwd=ROOT)
    with tempfile.TemporaryDirectory(prefix="mirrord-side-") as base, \
            tempfile.NamedTemporaryFile("w+", prefix="mirrord-side-", suffix=".log") as log:
        side_args = [a.replace(".xml", "-side.xml") if a.startswith("--junitxml") else a for a in args]
        side = subprocess.Popen([*pytest, "-p", "no:cacheprovider", f"--basetemp={base}/t", *side_args, *SIDE],
                                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
        try:
            main_status = subprocess.call([*pytest, *(f"--ignore={p}" for p in SIDE), *args, *MAIN], cwd=ROOT)
        finally:
            side_status = side.wait()
        log.seek(0)
        print(f"\n===== side lane: {' '.join(SIDE)} =====", flush=True)
        sys.stdout.write(log.read())
    statuses = [0 if s == NOTHING_SELECTED else s for s in (main_status, side_status)]
    return next((s for s in statuses if s != 0), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
