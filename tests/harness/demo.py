"""`make demo`: two local Kafka clusters, a trickle of records, mirrord between them, progress until Ctrl-C.

Everything it starts (brokers, producers, mirrord and its Spark JVM) is stopped on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import re
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

from tests.harness.kafka import start_pair
from tests.harness.mirrord import Mirrord, write_flow
from tests.harness.records import Trickle, count, create_topic

TOPICS = {"demo-orders": 3, "demo-payments": 2}
NOT_MIRRORED = {"internal-audit": 1}
RATE = 25  # records per second per topic


def metric(text: str, name: str) -> float:
    return sum(float(m) for m in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


def main() -> int:
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    work = Path(tempfile.mkdtemp(prefix="mirrord-demo-"))
    print(f"starting a source and a target Kafka broker (KRaft) in {work} ...", flush=True)
    source, target = start_pair(work)
    trickles, daemon = [], None
    try:
        for name, n in {**TOPICS, **NOT_MIRRORED}.items():
            create_topic(source.bootstrap, name, n)
            trickles.append(Trickle(source.bootstrap, name, n, total=10**9, rate=RATE).start())
        print(f"source {source.bootstrap}, target {target.bootstrap}; producing {RATE} records/s to "
              f"{', '.join([*TOPICS, *NOT_MIRRORED])}", flush=True)
        config = write_flow(work / "flow", source.bootstrap, target.bootstrap, "demo-.*", group="mirrord-demo",
                            conf={"flow": "demo"})
        print(f"starting mirrord --config {config} (whitelist 'demo-.*'); Ctrl-C stops everything", flush=True)
        daemon = Mirrord(config).start()
        shown = 0
        while not stop.wait(3):
            if not daemon.alive():
                print(daemon.output()[-3000:])
                print(f"mirrord exited with {daemon.process.returncode}")
                return 1
            out = daemon.output()
            for line in out[shown:].splitlines():
                if " mirrord" in line and ("INFO" in line or "WARNING" in line or "ERROR" in line):
                    print("  mirrord | " + line.split(" ", 2)[-1], flush=True)
            shown = len(out)
            if "mirroring " not in out:
                continue
            produced = sum(count(source.bootstrap, t) for t in TOPICS)
            mirrored = sum(count(target.bootstrap, t) for t in TOPICS)
            try:
                text = daemon.metrics()
                lag = int(metric(text, "mirrord_lag_records"))
                total = int(metric(text, "mirrord_records_total"))
            except OSError:
                lag = total = -1
            print(f"source {produced:>7} records | target {mirrored:>7} records | mirrord: {total} mirrored, "
                  f"lag {lag} | internal-audit in target: {count(target.bootstrap, 'internal-audit')}",
                  flush=True)
        return 0
    finally:
        print("\nstopping mirrord, producers and brokers ...", flush=True)
        if daemon is not None:
            print(f"mirrord exited with {daemon.stop()}")
        for t in trickles:
            t.stop()
        source.destroy()
        target.destroy()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
