"""Where a stream's milliseconds go in mirrord (issue 32 item 0): its stage clock's histograms
(jvm/src/main/java/io/mirrord/metrics/StageClock.java), read when the measured window starts and when it ends,
and the difference summed up per stage. The stages time one record in sixteen (by source offset) from its
source timestamp, the bench producer's send time: `fetched` (the source's consumer returned it from a poll),
`handed` (the source gave it to Spark), `sent` (the writer gave it to the producer), `acked` (the target
acknowledged it). The timing consumer's own fetch on the target comes after `acked`: the stream's latency less
`acked`.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

STAGES = ("fetched", "handed", "sent", "acked")


def read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def quantile(counts: list[int], q: float) -> int | None:
    """The q-quantile of a histogram of whole milliseconds (its last bucket: above the clock's range)."""
    total = sum(counts)
    if not total:
        return None
    seen = 0
    for ms, n in enumerate(counts):
        seen += n
        if seen >= q * total:
            return ms
    return len(counts) - 1


def summary(start: dict | None, end: dict | None) -> dict | None:
    """Per stage: records timed, p50 and p99 in ms, between two reads of the clock; None without an end."""
    if end is None:
        return None
    out: dict = {}
    for stage in STAGES:
        before = (start or {}).get("ms", {}).get(stage) or [0] * len(end["ms"][stage])
        counts = [b - a for a, b in zip(before, end["ms"][stage], strict=True)]
        out[stage] = {"timed": sum(counts), "p50_ms": quantile(counts, 0.5), "p99_ms": quantile(counts, 0.99)}
    polls = end["polls"] - (start or {}).get("polls", 0)
    out["records_per_poll"] = round((end["polled"] - (start or {}).get("polled", 0)) / polls, 1) if polls else None
    return out


class Window:
    """Reads the clock's file `after` seconds from now (the measured window's start) in a thread of its own;
    `close()` reads it again (the window's end, once the file's next write has come) and sums up."""

    def __init__(self, path: Path, after: float):
        self.path, self.start = path, None
        self._thread = threading.Thread(target=self._read_start, args=(after,), daemon=True)
        self._stop = threading.Event()
        self._thread.start()

    def _read_start(self, after: float) -> None:
        if not self._stop.wait(after):
            self.start = read(self.path)

    def close(self) -> dict | None:
        self._stop.set()
        self._thread.join()
        if not self.path.exists():
            return None
        time.sleep(1.2)  # the clock writes its file every second
        return summary(self.start, read(self.path))
