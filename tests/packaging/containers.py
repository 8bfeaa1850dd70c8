"""The Debian container the package tests and the molecule scenario install mirrord into.

The container reaches only the host's loopback, so everything the .deb depends on is put into the
cached root by debootstrap: a Java runtime, adduser, and python3-apt for Ansible's apt module.

``python -m tests.packaging.containers serve STATE_FILE [--bind-ro PATH ...]`` boots one and keeps it
until SIGTERM, writing ``{"leader": PID, "pid": PID}`` to STATE_FILE once it runs: molecule's
create playbook starts that, its destroy playbook sends SIGTERM to ``pid``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from tests.harness.container import DEFAULT_INCLUDE, Container, ensure_rootfs

ROOTFS_INCLUDE: tuple[str, ...] = (*DEFAULT_INCLUDE, "adduser", "python3-apt", "openjdk-17-jre-headless")


def rootfs() -> Path:
    return ensure_rootfs(ROOTFS_INCLUDE)


def serve(state: Path, bind_ro: list[str]) -> None:
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    with Container(rootfs(), bind_ro=bind_ro) as c:
        tmp = state.with_suffix(".tmp")
        tmp.write_text(json.dumps({"leader": c.leader, "pid": os.getpid(), "name": c.name}))
        tmp.rename(state)
        while not stop and c.process is not None and c.process.poll() is None:
            time.sleep(0.5)
    state.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.packaging.containers")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="boot a container and keep it until SIGTERM")
    s.add_argument("state", type=Path)
    s.add_argument("--bind-ro", action="append", default=[])
    sub.add_parser("rootfs", help="build (or find) the cached root and print its path")
    args = parser.parse_args(argv)
    if args.command == "rootfs":
        print(rootfs())
    else:
        serve(args.state, args.bind_ro)
    return 0


if __name__ == "__main__":
    sys.exit(main())
