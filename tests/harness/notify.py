"""systemd's side of sd_notify, for tests: a datagram socket that records every message mirrord sends."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path


class NotifySocket:
    def __init__(self, path: Path):
        self.path = path
        self.messages: list[tuple[float, str]] = []  # (monotonic time, one KEY=VALUE line)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(str(path))
        self._sock.settimeout(0.2)
        self._closed = False
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def env(self, watchdog_seconds: float | None = None) -> dict[str, str]:
        """What systemd puts in a Type=notify service's environment (with WatchdogSec= when given)."""
        env = {"NOTIFY_SOCKET": str(self.path)}
        if watchdog_seconds:
            env["WATCHDOG_USEC"] = str(int(watchdog_seconds * 1e6))
        return env

    def _read(self) -> None:
        while not self._closed:
            try:
                data = self._sock.recv(65536)
            except (TimeoutError, OSError):
                continue
            now = time.monotonic()
            with self._lock:
                self.messages.extend((now, line) for line in data.decode(errors="replace").splitlines())

    def lines(self, prefix: str = "", since: float = 0.0) -> list[str]:
        with self._lock:
            return [line for t, line in self.messages if line.startswith(prefix) and t >= since]

    def times(self, line: str, since: float = 0.0) -> list[float]:
        with self._lock:
            return [t for t, seen in self.messages if seen == line and t >= since]

    def longest_silence(self, line: str, since: float, until: float) -> float:
        """The longest stretch between `since` and `until` without `line` (e.g. WATCHDOG=1)."""
        stamps = [since, *(t for t in self.times(line, since) if t <= until), until]
        return max(b - a for a, b in zip(stamps, stamps[1:], strict=False))

    def close(self) -> None:
        self._closed = True
        self._sock.close()
