"""What a contender costs: peak RSS and CPU seconds of its whole process tree, read from /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, utime+stime ticks, rss pages) of one process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2:].split()
    # fields[0] is field 3 of proc(5): state; ppid is 4, utime 14, stime 15, rss 24.
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[21])


def cpu_seconds(pid: int | None) -> float | None:
    """One process's CPU seconds so far, or None (no pid, or gone)."""
    stat = None if pid is None else _stat(pid)
    return None if stat is None else stat[1] / TICK


def tree(root: int) -> dict[int, tuple[int, int]]:
    """pid -> (cpu ticks, rss pages) for root and all its descendants."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st:
                stats[int(name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            out[pid] = stats[pid][1:]
            todo.extend(children.get(pid, ()))
    return out


@dataclass
class Usage:
    cpu_seconds: float
    peak_rss_bytes: int


class TreeSampler:
    """Samples a process tree every `interval` seconds on a thread of its own.

    CPU is the sum over every process ever seen of its last sampled utime+stime, so processes
    that exit during the run still count (up to their last sample)."""

    def __init__(self, root: int, interval: float = 0.5):
        self.root = root
        self.interval = interval
        self._cpu: dict[int, int] = {}
        self._peak_rss = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def sample(self) -> None:
        procs = tree(self.root)
        with self._lock:
            for pid, (cpu, _) in procs.items():
                self._cpu[pid] = max(cpu, self._cpu.get(pid, 0))
            self._peak_rss = max(self._peak_rss, sum(rss for _, rss in procs.values()) * PAGE)

    def cpu_now(self) -> float:
        """The tree's CPU seconds so far, sampled now: two calls bound a window (a backfill's copying)."""
        self.sample()
        with self._lock:
            return sum(self._cpu.values()) / TICK

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def stop(self) -> Usage:
        self._stop.set()
        self._thread.join()
        self.sample()
        return Usage(sum(self._cpu.values()) / TICK, self._peak_rss)


def thread_cpu(root: int) -> list[tuple[float, int, str, str]]:
    """(CPU seconds, pid, process name, thread name) of every thread in root's tree, most CPU first: where a
    contender's CPU went (thread names group Spark's task threads, Kafka's I/O threads, ...)."""
    return sorted(((cpu, pid, process, name) for (pid, _), (cpu, process, name) in threads(root).items()),
                  reverse=True)


def threads(root: int) -> dict[tuple[int, int], tuple[float, str, str]]:
    """(pid, tid) -> (CPU seconds, process name, thread name) of every thread in root's tree now: two calls bound a
    window (`window_cpu`)."""
    out = {}
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/comm") as f:
                process = f.read().strip()
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                    raw = f.read()
            except OSError:
                continue
            name = raw[raw.index(b"(") + 1:raw.rindex(b")")].decode("utf-8", "replace")
            fields = raw[raw.rindex(b")") + 2:].split()
            out[(pid, int(tid))] = ((int(fields[11]) + int(fields[12])) / TICK, process, name)
    return out


def window_cpu(before: dict, after: dict) -> list[tuple[float, int, str, str]]:
    """thread_cpu's rows for the CPU each thread used between two `threads` calls (a backfill's copying; a thread
    that ended in between is not counted)."""
    rows = [(cpu - before.get(key, (0.0,))[0], key[0], process, name) for key, (cpu, process, name) in after.items()]
    return sorted((row for row in rows if row[0] > 0), reverse=True)


# Where a contender's CPU went, by thread name (threads.tsv): the threads that move records (Spark's task
# threads, MirrorMaker 2's connector tasks, MirrorMaker 1's mirror threads, the producers' I/O threads) apart
# from the JVM's own (the JIT's compilers, the collector) and from the rest (a Spark driver's py4j and main
# threads, which plan the query at the start; schedulers, clients' coordinators, Python).
THREAD_KINDS = (
    ("records", ("Executor task l", "task-thread-", "mirrormaker-thr", "kafka-producer-")),
    ("jit", ("C1 CompilerThre", "C2 CompilerThre")),
    ("gc", ("GC Thread#", "G1 ")),
)


def thread_kind(name: str) -> str:
    """records, jit, gc or other (a thread name as /proc shows it: its first 15 characters)."""
    for kind, prefixes in THREAD_KINDS:
        if name.startswith(prefixes):
            return kind
    return "other"


def cpu_by_kind(rows: list[tuple[float, int, str, str]]) -> dict[str, float]:
    """CPU seconds per thread kind of thread_cpu's rows."""
    kinds = {kind: 0.0 for kind, _ in THREAD_KINDS} | {"other": 0.0}
    for cpu, _, _, name in rows:
        kinds[thread_kind(name)] += cpu
    return kinds


def dump_flight_recordings(root: int, into) -> None:
    """Writes the flight recordings of every JVM in root's tree (started with -XX:StartFlightRecording, as
    BENCH_JAVA_OPTIONS does) to `into`/<pid>.jfr before the contender is stopped: a stop kills them unwritten."""
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "java":
                    continue
        except OSError:
            continue
        # the JVM writes the file: a relative path would be its working directory's, not ours
        subprocess.run(["jcmd", str(pid), "JFR.dump", f"filename={Path(into).resolve()}/{pid}.jfr"],
                       capture_output=True, timeout=120, check=False)


def terminate(proc: subprocess.Popen, grace: float = 20) -> None:
    """Stop a process started with start_new_session=True, with everything it started."""
    if proc.poll() is not None:
        _killpg(proc.pid, signal.SIGKILL)
        return
    _killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    _killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
