"""A turn's wake-up that a signal handler may ring.

Python runs a signal handler in the main thread between two bytecodes, also while that thread holds the
lock inside a `threading.Event` it is waiting on (`Condition.wait` checks ownership with the lock held).
A handler that called `Event.set()` on that event then waited for its own thread for ever: CI saw
mirrord hang at SIGTERM that way. So the handlers take no lock: they set a flag and write a byte to a
pipe, and the supervisor sleeps in select() on the pipe (docs/decisions.md §11).
"""

from __future__ import annotations

import os
import select


class Wake:
    """set() from any thread or signal handler; wait() in the supervisor's thread alone."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    def set(self) -> None:
        try:
            os.write(self._write, b"\0")
        except BlockingIOError:  # the pipe is full of wake-ups already: the next wait returns at once
            pass

    def wait(self, timeout: float) -> bool:
        """Sleep until set() or timeout; True when woken. The wake-ups so far are used up (one read: a flood
        of signals cannot keep it reading; what a read leaves makes the next wait return at once)."""
        ready, _, _ = select.select([self._read], [], [], timeout)
        if ready:
            try:
                os.read(self._read, 65536)
            except BlockingIOError:
                pass
        return bool(ready)
