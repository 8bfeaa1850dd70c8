"""The bench times READY=1 through an sd_notify socket of its own, as systemd would."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.run import ReadyWatch


def _notify(address: str, text: str) -> None:
    env = {**os.environ, "NOTIFY_SOCKET": address}
    subprocess.run([sys.executable, "-c", f"import sdnotify; sdnotify.SystemdNotifier(debug=True).notify({text!r})"],
                   env=env, check=True, timeout=30)


def test_ready_is_timed_from_the_first_ready_message():
    watch = ReadyWatch()
    _notify(watch.address, "STATUS=starting")
    _notify(watch.address, "READY=1\nSTATUS=mirroring")
    seconds = watch.stop()
    assert seconds is not None and 0 < seconds < 30


def test_no_ready_message_is_none():
    watch = ReadyWatch()
    _notify(watch.address, "STATUS=starting\nWATCHDOG=1")
    assert watch.stop() is None
