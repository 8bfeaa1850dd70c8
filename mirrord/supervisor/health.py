"""Whether each cluster answers, and since when (docs/decisions.md §5: an outage is a state, not a crash).

A probe thread asks each cluster for its metadata every few seconds. The supervisor reads the result
to word STATUS, to hold the query back while a cluster is away, to tell an outage from mirrord's own
failure (a batch that runs long while a cluster is away is waiting, not stalled), and to set
`mirrord_cluster_up{cluster}`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from mirrord.errors import ClusterUnavailable
from mirrord.kafka.admin import Cluster
from mirrord.metrics import Metrics

log = logging.getLogger(__name__)
PROBE_EVERY = 2.0
PROBE_AWAY_EVERY = 0.5  # while a cluster is away: mirroring resumes within a second of its return
PROBE_TIMEOUT = 5.0


@dataclass
class Reachability:
    up: bool = True
    since: float = 0.0  # monotonic time of the last change
    since_wall: float = 0.0  # the same, as Unix time, for people
    reason: str = ""


class ClusterWatch:
    def __init__(self, clusters: list[Cluster], metrics: Metrics, stop: threading.Event):
        self.clusters = clusters
        self.metrics = metrics
        self._stop = stop
        self._lock = threading.Lock()
        now, wall = time.monotonic(), time.time()
        self._state = {c.name: Reachability(True, now, wall) for c in clusters}
        self._last_down = float("-inf")  # monotonic time a cluster was last seen away
        self.on_change: Callable[[], None] = lambda: None  # a cluster went away or came back
        self.on_return: Callable[[str, float], None] = lambda name, away: None  # a cluster back after `away` s

    def start(self) -> None:
        self.probe()
        threading.Thread(target=self._loop, name="clusters", daemon=True).start()

    def _loop(self) -> None:
        while not self._stop.wait(PROBE_EVERY if self.all_up() else PROBE_AWAY_EVERY):
            self.probe()

    def probe(self) -> None:
        for cluster in self.clusters:
            try:
                cluster.check(timeout=PROBE_TIMEOUT)
                self._set(cluster, True, "")
            except ClusterUnavailable as exc:
                self._set(cluster, False, str(exc))

    def _set(self, cluster: Cluster, up: bool, reason: str) -> None:
        with self._lock:
            state = self._state[cluster.name]
            changed = state.up != up
            lasted = time.monotonic() - state.since
            if changed:
                state.up, state.since, state.since_wall = up, time.monotonic(), time.time()
            state.reason = reason
            if not up:
                self._last_down = time.monotonic()
        self.metrics.cluster_up.labels(self.metrics.flow, cluster.name).set(1 if up else 0)
        if changed:
            self.on_change()
        if changed and up:
            self.on_return(cluster.name, lasted)
            log.warning("%s cluster (%s) answers again after %s", cluster.name, cluster.bootstrap,
                        _duration(lasted))
        elif changed:
            log.error("%s cluster (%s) unreachable: %s; mirroring resumes when it answers", cluster.name,
                      cluster.bootstrap, reason)

    def all_up(self) -> bool:
        with self._lock:
            return all(s.up for s in self._state.values())

    def is_up(self, name: str) -> bool:
        with self._lock:
            return self._state[name].up

    def answering_since(self, name: str) -> float:
        """Since when (monotonic) `name` has answered; now while it is away."""
        with self._lock:
            state = self._state[name]
            return state.since if state.up else time.monotonic()

    def up_for(self) -> float:
        """Seconds every cluster has answered without a break (0 while one is away)."""
        with self._lock:
            if not all(s.up for s in self._state.values()):
                return 0.0
            return time.monotonic() - max(s.since for s in self._state.values())

    def down_within(self, seconds: float) -> bool:
        """Whether a cluster was away at some probe in the last `seconds`."""
        with self._lock:
            return time.monotonic() - self._last_down <= seconds

    def away(self) -> list[str]:
        """One phrase per unreachable cluster, for STATUS and logs."""
        with self._lock:
            items = [(c, self._state[c.name]) for c in self.clusters]
        return [f"{c.name} cluster ({c.bootstrap}) unreachable since "
                f"{time.strftime('%H:%M:%S', time.localtime(s.since_wall))} ({_duration(time.time() - s.since_wall)})"
                for c, s in items if not s.up]


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
