"""systemd notifications (sd_notify) from the main process only.

The socket is opened here and NOTIFY_SOCKET is then removed from the environment, so neither the
Spark JVM nor the Python workers it starts can send READY or WATCHDOG on mirrord's behalf.
"""

from __future__ import annotations

import os

import sdnotify

from mirrord.settings.redact import redact


class Notifier:
    def __init__(self) -> None:
        self._notifier = sdnotify.SystemdNotifier() if os.environ.get("NOTIFY_SOCKET") else None
        usec = os.environ.get("WATCHDOG_USEC", "")
        pid = os.environ.get("WATCHDOG_PID", "")
        ours = not pid or pid == str(os.getpid())
        self.watchdog_interval = int(usec) / 2e6 if usec.isdigit() and ours else None
        for var in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
            os.environ.pop(var, None)

    def _send(self, text: str) -> None:
        if self._notifier is not None:
            self._notifier.notify(redact(text))

    def ready(self, status: str) -> None:
        self._send(f"READY=1\nSTATUS={status}")

    def status(self, status: str) -> None:
        self._send(f"STATUS={status}")

    def watchdog(self) -> None:
        self._send("WATCHDOG=1")

    def reloading(self) -> None:
        self._send("RELOADING=1\nSTATUS=reloading configuration")

    def stopping(self) -> None:
        self._send("STOPPING=1\nSTATUS=stopping")
