"""The errors mirrord raises where a problem is found; `cli` maps them to exit statuses."""

from __future__ import annotations

import os

EX_OK = 0
EX_SOFTWARE = 1
EX_UNAVAILABLE = 69
EX_CONFIG = 78


class MirrordError(Exception):
    exit_status = EX_SOFTWARE


class ConfigError(MirrordError):
    """Invalid configuration: exit 78 so systemd does not restart-loop (RestartPreventExitStatus=78)."""

    exit_status = EX_CONFIG

    def __init__(self, file: str | os.PathLike | None, key: str | None, reason: str):
        self.file = str(file) if file is not None else None
        self.key = key
        self.reason = reason
        where = ": ".join(part for part in (self.file, self.key) if part)
        super().__init__(f"{where}: {reason}" if where else reason)


class ClusterUnavailable(MirrordError):
    """A cluster did not answer at start; a restart later may succeed."""

    exit_status = EX_UNAVAILABLE
