"""Run mirrord as a subprocess, the way systemd would, with its config files in a directory."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.harness.jvm import spark_driver_options
from tests.harness.kafka import free_port

ROOT = Path(__file__).resolve().parents[2]
# make test runs one case of each edge whose cases differ only in trigger or delivery (the suite's 30-minute bar);
# MIRRORD_EVERY_CASE=1 runs the rest too (`MIRRORD_EVERY_CASE=1 make test`)
EVERY_CASE = pytest.mark.skipif(os.environ.get("MIRRORD_EVERY_CASE") != "1", reason="MIRRORD_EVERY_CASE=1 runs it")


def mirrord_command() -> list[str]:
    return [sys.executable, "-m", "mirrord"]


def write_flow(directory: Path, source: str, target: str, whitelist: str, *, group: str,
               conf: dict[str, str] | None = None, consumer: dict[str, str] | None = None,
               producer: dict[str, str] | None = None, metrics: bool = True) -> Path:
    """mirrord.conf, consumer.properties and producer.properties as an operator would write them."""
    directory.mkdir(parents=True, exist_ok=True)
    consumer_props = {"bootstrap.servers": source, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": "false", **(consumer or {})}
    producer_props = {"bootstrap.servers": target, "acks": "all", "enable.idempotence": "true",
                      "linger.ms": "5", **(producer or {})}
    (directory / "consumer.properties").write_text("".join(f"{k}={v}\n" for k, v in consumer_props.items()))
    (directory / "producer.properties").write_text("".join(f"{k}={v}\n" for k, v in producer_props.items()))
    settings = {
        "flow": "test",
        "consumer.config": "consumer.properties",
        "producer.config": "producer.properties",
        "whitelist": whitelist,
        "num.streams": "2",
        "offset.commit.interval.ms": "500",
        "checkpoint.interval.ms": "5000",
        "state.dir": str(directory / "state"),
        "metrics.listen": f"127.0.0.1:{free_port()}" if metrics else "",
        **(conf or {}),
    }
    body = "[mirrord]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items())
    body += "\n[spark]\nspark.driver.memory = 768m\n"
    if spark_driver_options():  # a start in seconds, not tens of them (tests/harness/jvm.py)
        body += f"spark.driver.extraJavaOptions = {spark_driver_options()}\n"
    path = directory / "mirrord.conf"
    path.write_text(body)
    return path


class Mirrord:
    """One mirrord process; its output goes to `log` for assertions and post-mortems."""

    def __init__(self, config: Path, *args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()):
        self.config = config
        self.args = args
        self.prefix = tuple(prefix)  # what runs mirrord, e.g. netns.Namespace.command() (it must exec, not fork)
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1", **(env or {})}
        self.log = config.parent / "mirrord.log"
        self.process: subprocess.Popen | None = None
        self._log_start = 0

    @property
    def metrics_url(self) -> str:
        for line in self.config.read_text().splitlines():
            if line.startswith("metrics.listen"):
                return f"http://{line.split('=', 1)[1].strip()}/metrics"
        raise AssertionError("metrics disabled in this flow")

    def start(self) -> Mirrord:
        self._log_start = self.log.stat().st_size if self.log.exists() else 0
        self.process = subprocess.Popen(
            [*self.prefix, *mirrord_command(), "--config", str(self.config), *self.args],
            stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, cwd=ROOT, env=self.env,
            start_new_session=True,
        )
        return self

    def output(self) -> str:
        """This process's output only (a restart appends to the same file)."""
        if not self.log.exists():
            return ""
        with open(self.log, "rb") as f:
            f.seek(self._log_start)
            return f.read().decode(errors="replace")

    def wait_ready(self, timeout: float = 120) -> None:
        """Ready = the daemon logged that it is mirroring (READY=1 is sent at the same point)."""
        deadline = time.monotonic() + timeout
        while "mirroring " not in self.output():
            if self.process.poll() is not None:
                raise AssertionError(f"mirrord exited with {self.process.returncode}:\n{self.output()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"mirrord not ready after {timeout}s:\n{self.output()[-3000:]}")
            time.sleep(0.2)

    def wait_logged(self, text: str, timeout: float = 120) -> float:
        """Wait for `text` in this process's output (it must not exit first); returns the seconds waited."""
        began = time.monotonic()
        deadline = began + timeout
        while text not in self.output():
            if self.process.poll() is not None:
                raise AssertionError(f"mirrord exited before {text!r}:\n{self.output()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {text!r} in mirrord's output")
            time.sleep(0.2)
        return time.monotonic() - began

    def metrics(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as r:
            return r.read().decode()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: int) -> None:
        os.kill(self.process.pid, sig)

    def kill9(self) -> None:
        """As systemd does on a crash: SIGKILL to the whole process tree (the Spark JVM, in a session of
        its own, too)."""
        tree = descendants(self.process.pid)
        os.killpg(self.process.pid, signal.SIGKILL)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(30)
        self._wait_group_gone()
        wait_gone(tree)

    def kill_jvm(self, timeout: float = 60) -> int:
        """As the kernel's out-of-memory killer does: SIGKILL to Spark's JVM alone, the largest process of the
        tree. mirrord exits by itself (systemd restarts it); returns its exit status."""
        tree = descendants(self.process.pid)
        os.kill(self.jvm_pid(), signal.SIGKILL)
        status = self.process.wait(timeout)
        self._wait_group_gone()
        wait_gone(tree)
        return status

    def stop(self, timeout: float = 90) -> int:
        """SIGTERM to the main process only (systemd's KillMode=mixed), then wait for the exit status."""
        if self.alive():
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGUSR1)  # faulthandler: where every thread is stuck
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(2)
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(30)
                raise AssertionError(f"mirrord did not stop within {timeout}s:\n{self.output()[-12000:]}") from None
        self._wait_group_gone()
        return self.process.returncode

    def jvm_pid(self) -> int | None:
        """Spark's JVM (a child of mirrord's in a session of its own), once started."""
        return next((pid for pid in descendants(self.process.pid) if command_line(pid).startswith("java")
                     or "/java" in command_line(pid).split(" ", 1)[0]), None)

    def _wait_group_gone(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.killpg(self.process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        os.killpg(self.process.pid, signal.SIGKILL)


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, whatever its session or process group."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids: list[int], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise AssertionError(f"processes {pids} still there after {timeout}s")
        time.sleep(0.1)


def metric_value(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample in Prometheus text format, matching all the given labels; None if absent."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        series, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in series for k, v in labels.items()):
            return float(value)
    return None
