"""Where `make test`'s CPU goes: an opt-in pytest plugin that writes, per test, its wall time, the CPU seconds its
process tree used (pytest, the daemons and brokers it started, what they reaped) and the machine's busy CPU
seconds over the same span, one tab-separated line each.

    python -m tests.lanes -p tests.harness.cputime      # lines go to $MIRRORD_TEST_CPU_LOG (default /tmp/cpu.tsv)

The tree's CPU is counted from /proc: the utime, stime, cutime and cstime of pytest and of every live descendant,
so a process reaped by a live parent is counted through that parent; one whose parent died first is lost.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

_TICK = os.sysconf("SC_CLK_TCK")
_LOG = Path(os.environ.get("MIRRORD_TEST_CPU_LOG", "/tmp/cpu.tsv"))
_START = pytest.StashKey[tuple[float, int, int]]()


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, the process's CPU ticks including its reaped children's), or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), sum(int(f) for f in fields[11:15])


def _tree_ticks(root: int) -> int:
    stats = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            stats[int(entry.name)] = stat
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0))[1]
        todo.extend(children.get(pid, []))
    return total


def _machine_busy_ticks() -> int:
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4]    # all but idle and iowait


def pytest_runtest_protocol(item, nextitem):
    item.stash[_START] = (time.monotonic(), _tree_ticks(os.getpid()), _machine_busy_ticks())


def pytest_runtest_makereport(item, call):
    if call.when != "teardown" or _START not in item.stash:
        return
    start, tree, busy = item.stash[_START]
    line = "\t".join([f"{time.monotonic() - start:.1f}", f"{(_tree_ticks(os.getpid()) - tree) / _TICK:.1f}",
                      f"{(_machine_busy_ticks() - busy) / _TICK:.1f}", item.nodeid])
    with _LOG.open("a") as log:
        log.write(line + "\n")
