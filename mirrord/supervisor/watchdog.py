"""systemd's watchdog: pinged while mirrord itself is healthy (docs/decisions.md §5).

An unreachable cluster is not mirrord's fault and does not stop the pings; a batch overdue by
`stall.timeout.ms` while both clusters answered does, and so does a JVM that does not answer (the
supervisor's question to it blocks or fails) or a wedged supervisor (nobody pings).
"""

from __future__ import annotations

import logging
import time

from mirrord.supervisor.notify import Notifier

log = logging.getLogger("mirrord")
TURN = 0.5  # the supervisor's turn, at most


class Watchdog:
    def __init__(self, notifier: Notifier):
        self.notifier = notifier
        self._next_ping = 0.0
        self._stall_reported = False

    @property
    def turn(self) -> float:
        """Seconds between the supervisor's turns: at least two per watchdog interval."""
        interval = self.notifier.watchdog_interval
        return TURN if interval is None else min(TURN, interval / 2)

    def ping(self) -> None:
        interval = self.notifier.watchdog_interval
        now = time.monotonic()
        if interval is not None and now >= self._next_ping:
            self.notifier.watchdog()
            self._next_ping = now + interval

    def stalled(self, overdue: float | None, stall_timeout_ms: int) -> bool:
        """Whether the batch in flight is overdue by more than `stall.timeout.ms`, counting only the time both
        clusters answered (None between queries); said once per stall."""
        if overdue is None:
            return False
        stalled = overdue > stall_timeout_ms / 1e3
        if stalled and not self._stall_reported:
            log.warning("batch overdue by %.0fs while both clusters answer (stall.timeout.ms=%d): withholding "
                        "the watchdog", overdue, stall_timeout_ms)
        self._stall_reported = stalled
        return stalled
