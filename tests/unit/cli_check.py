"""`mirrord --check` in-process, as the unit tests run it on configurations they wrote."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from mirrord.cli import main


def run_check(directory: Path, args: Sequence[str], env: Mapping[str, str], monkeypatch) -> int:
    """`mirrord --check ARGS` in `directory` with no MIRRORD_* variables but `env`'s (the jars' aside); its
    exit status. The root logger's handlers and the SIGTERM handler main() sets are put back after."""
    handlers, sigterm = logging.getLogger().handlers[:], signal.getsignal(signal.SIGTERM)
    with monkeypatch.context() as m:
        m.chdir(directory)
        for var in [v for v in os.environ if v.startswith("MIRRORD_") and v != "MIRRORD_SPARK_JARS"]:
            m.delenv(var)
        for var, value in env.items():
            m.setenv(var, value)
        try:
            return main(["--check", *args])
        except SystemExit as exc:
            return exc.code
        finally:
            logging.getLogger().handlers[:] = handlers
            signal.signal(signal.SIGTERM, sigterm)
