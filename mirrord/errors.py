"""The errors mirrord raises where a problem is found; `cli` maps them to exit statuses."""

from __future__ import annotations

import os

EX_OK = 0
EX_SOFTWARE = 1
EX_UNAVAILABLE = 69
EX_TEMPFAIL = 75
EX_CONFIG = 78


class MirrordError(Exception):
    exit_status = EX_SOFTWARE


# Control characters shown escaped: a file name, key or value holding a line break stays on one line.
_ONE_LINE = {c: f"\\x{c:02x}" for c in (*range(32), 127, 0x85)} | {
    ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def one_line(text: str) -> str:
    return text.translate(_ONE_LINE)


class ConfigError(MirrordError):
    """Invalid configuration: exit 78 so systemd does not restart-loop (RestartPreventExitStatus=78).

    Its message is one line, whatever the file name, key or reason hold."""

    exit_status = EX_CONFIG

    def __init__(self, file: str | os.PathLike | None, key: str | None, reason: str):
        self.file = str(file) if file is not None else None
        self.key = key
        self.reason = reason
        where = ": ".join(part for part in (self.file, self.key) if part)
        super().__init__(one_line(f"{where}: {reason}" if where else reason))


class ClusterUnavailable(MirrordError):
    """A cluster did not answer at start; a restart later may succeed."""

    exit_status = EX_UNAVAILABLE


class NotConfirmed(MirrordError):
    """The election's coordinator has not confirmed this host's hold within the lease (or a lapsed lease's
    records may still be delivered): the query does not start yet; an outage of the election, not a fault."""


class Fenced(MirrordError):
    """This host lost the flow's election while mirroring: its JVM was halted so that nothing more reaches
    the target; systemd restarts mirrord (Restart=on-failure), as a standby."""

    exit_status = EX_TEMPFAIL
