"""A real Spark standalone cluster on loopback: one master and one or more workers, started with pyspark's own
launcher.

Each runs as ``<SPARK_HOME>/bin/spark-class org.apache.spark.deploy.{master.Master,worker.Worker}``,
where SPARK_HOME is the pyspark package itself (pip's pyspark ships the launcher and the jars), each in
a process group of its own, bound to 127.0.0.1 on ephemeral ports, with logs, work and local dirs and
an empty SPARK_CONF_DIR under one temporary directory.

The worker, and so every executor it launches, cannot run Python: its environment has no virtualenv,
``PYSPARK_PYTHON=/bin/false``, and ``PYTHONHOME`` pointing at a directory that does not exist. The
last one matters: an executor starts the Python the *driver* names (the driver's PYSPARK_PYTHON
travels with each Python function), and that interpreter exists on this machine; but it inherits the
executor's environment, and no Python starts with a bogus PYTHONHOME. So a job passes on this cluster
only if its executors run JVM code alone, which is what mirrord's data path must do.

Usage::

    from tests.harness.spark_cluster import SparkStandalone

    with SparkStandalone() as cluster:   # returns once the worker is ALIVE: ~4 s idle, 10-20 s on a busy machine
        spark = SparkSession.builder.master(cluster.url).config("spark.driver.host", "127.0.0.1") ...
        cluster.applications()           # the master's view: running and finished apps
        cluster.executor_logs()          # each executor's stderr, from the workers' work dirs

    with SparkStandalone(workers=2, cores=1) as cluster:  # two workers of a core each
        cluster.executors()              # the executor JVMs running now: {executor id: (worker, pid)}
        cluster.kill_worker(0)           # a node lost: the worker and its executors, kill -9
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.harness.kafka import free_port
from tests.harness.mirrord import command_line, descendants

# PYTHONHOME that no interpreter can start with (Python fails at init: "No module named 'encodings'").
NO_PYTHON_HOME = "/nonexistent/mirrord-executors-run-no-python"
# Whatever could lead an executor to a Python environment, removed from the worker's environment.
PYTHON_VARIABLES = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYSPARK_DRIVER_PYTHON",
                    "PYSPARK_PYTHON", "PYTHONHOME", "CONDA_PREFIX")


class SparkClusterError(RuntimeError):
    """The master or the worker did not start, or exited."""


def spark_home() -> Path:
    """The pyspark package directory: pip's pyspark is a Spark distribution (bin/spark-class, jars/)."""
    try:
        from pyspark.find_spark_home import _find_spark_home
        home = Path(_find_spark_home())
    except Exception:  # noqa: BLE001 - fall back to the package itself
        import pyspark
        home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
        raise SparkClusterError(f"no bin/spark-class and jars/ in SPARK_HOME {home}: is pyspark installed?")
    return home


@dataclass
class Worker:
    """One worker of the cluster: its ports, its process (None once stopped), its work dir and log."""

    index: int
    port: int
    web_port: int
    dir: Path
    log: Path
    proc: subprocess.Popen | None = None


class SparkStandalone:
    """One Spark standalone master and `workers` workers of `cores` cores and `memory` each; `start()` returns once
    every worker is registered ALIVE.

    `url` is the master URL for drivers (``spark://127.0.0.1:<port>``), `web_url` the master's web UI,
    whose ``/json/`` the harness polls. `stop()` kills every process group (the workers' executors too)
    and removes the temporary directory unless `keep` is set.
    """

    def __init__(self, workdir: Path | None = None, *, workers: int = 1, cores: int = 2, memory: str = "1g",
                 daemon_memory: str = "256m", keep: bool = False) -> None:
        self.home = spark_home()
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="mirrord-spark-"))
        self.worker_count = workers
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.keep = keep
        self.port = self.web_port = 0
        self.master: subprocess.Popen | None = None
        self.workers: list[Worker] = []
        self.started_in: float | None = None  # seconds from launch to every worker ALIVE

    # -- addresses -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def master_log(self) -> Path:
        return self.workdir / "logs" / "master.log"

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 120) -> SparkStandalone:
        started = time.monotonic()
        for d in ("logs", "conf", "work", "local", "tmp"):
            (self.workdir / d).mkdir(parents=True, exist_ok=True)
        self.port, self.web_port = free_port(), free_port()
        self.workers = [Worker(i, free_port(), free_port(), self.workdir / "work" / f"worker-{i}",
                               self.workdir / "logs" / f"worker-{i}.log") for i in range(self.worker_count)]
        try:
            self.master = self._launch("org.apache.spark.deploy.master.Master", self.master_log, self._master_env(),
                                       "--host", "127.0.0.1", "--port", str(self.port),
                                       "--webui-port", str(self.web_port))
            for worker in self.workers:
                self.start_worker(worker.index, wait=False)
            self._wait(lambda: len(self.alive_workers()) == len(self.workers), timeout,
                       f"{len(self.workers)} workers registered ALIVE with the master")
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - started
        return self

    def start_worker(self, index: int, wait: bool = True, timeout: float = 120) -> None:
        """Starts worker `index` (again, after kill_worker); with `wait`, returns once the master lists it ALIVE."""
        worker = self.workers[index]
        worker.dir.mkdir(parents=True, exist_ok=True)
        worker.proc = self._launch("org.apache.spark.deploy.worker.Worker", worker.log, self._worker_env(worker),
                                   "--host", "127.0.0.1", "--port", str(worker.port),
                                   "--webui-port", str(worker.web_port), "--cores", str(self.cores),
                                   "--memory", self.memory, "--work-dir", str(worker.dir), self.url)
        if wait:
            self._wait(lambda: any(w.get("port") == worker.port for w in self.alive_workers()), timeout,
                       f"worker {index} registered ALIVE with the master")

    def kill_worker(self, index: int) -> None:
        """A node lost: kill -9 to worker `index`'s process group, the worker and its executors at once; returns
        once they are gone. The master sees the worker's connection close and tells the driver its executors
        are lost."""
        worker = self.workers[index]
        proc, worker.proc = worker.proc, None
        if proc is not None:
            _signal_group(proc, signal.SIGKILL)
            proc.wait(30)
            _wait_group_gone(proc.pid, 30)

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM to each process group (workers first: they kill their executors), SIGKILL after `timeout`."""
        procs = [w.proc for w in self.workers] + [self.master]
        for w in self.workers:
            w.proc = None
        self.master = None
        for proc in procs:
            if proc is None:
                continue
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(10)
            _wait_group_gone(proc.pid, timeout)
        if not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- the master's view ---------------------------------------------------------------------
    def state(self) -> dict:
        """The master's JSON (``/json/``): workers, aliveworkers, cores, activeapps, completedapps, status."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as r:
            return json.loads(r.read().decode())

    def alive_workers(self) -> list[dict]:
        try:
            state = self.state()
        except (OSError, ValueError):  # web UI not up yet
            return []
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def applications(self) -> list[dict]:
        """Running and finished applications, as the master lists them (name, state, cores, ...)."""
        state = self.state()
        return [*state.get("activeapps", []), *state.get("completedapps", [])]

    def executor_logs(self, tail: int | None = 4000) -> str:
        """The stderr of every executor the workers ran (the last `tail` characters of each, or all):
        where an executor's failure is explained. A worker runs them in ``app-*/<executor id>/`` of its dir."""
        parts = []
        for path in sorted((self.workdir / "work").glob("worker-*/app-*/*/stderr")):
            text = path.read_text(errors="replace")
            parts.append(f"==> {path} <==\n{text[-tail:] if tail else text}")
        return "\n".join(parts)

    def executors(self) -> dict[str, tuple[int, int]]:
        """The executor JVMs running now, by Spark's executor id: (worker index, pid) of each of the workers'
        children that runs CoarseGrainedExecutorBackend."""
        found = {}
        for worker in self.workers:
            for pid in descendants(worker.proc.pid) if worker.proc is not None else []:
                args = command_line(pid).split()
                if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in args and "--executor-id" in args:
                    found[args[args.index("--executor-id") + 1]] = (worker.index, pid)
        return found

    def logs(self) -> str:
        """The tails of the master's and the workers' logs, for failure messages."""
        out = []
        for path in (self.master_log, *(w.log for w in self.workers)):
            text = path.read_text(errors="replace")[-3000:] if path.exists() else "(none)"
            out.append(f"==> {path} <==\n{text}")
        return "\n".join(out)

    # -- internals -----------------------------------------------------------------------------
    def _base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
        env.update({
            "SPARK_HOME": str(self.home),
            "SPARK_CONF_DIR": str(self.workdir / "conf"),  # empty: no spark-env.sh, no spark-defaults.conf
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(self.workdir / "local"),
            "SPARK_LOG_DIR": str(self.workdir / "logs"),
            "SPARK_PID_DIR": str(self.workdir / "tmp"),
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_DAEMON_JAVA_OPTS": f"-Djava.io.tmpdir={self.workdir / 'tmp'}",
        })
        return env

    def _master_env(self) -> dict[str, str]:
        return self._base_env()

    def _worker_env(self, worker: Worker) -> dict[str, str]:
        """The worker's, hence every executor's, environment: JVM only, no way to start a Python."""
        env = {k: v for k, v in self._base_env().items() if k not in PYTHON_VARIABLES}
        venv = sys.prefix if sys.prefix != sys.base_prefix else None
        venvs = {str(Path(v) / "bin") for v in (os.environ.get("VIRTUAL_ENV"), venv) if v}
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep)
                                      if p and p not in venvs)
        env["PYSPARK_PYTHON"] = "/bin/false"
        env["PYTHONHOME"] = NO_PYTHON_HOME
        env["SPARK_WORKER_DIR"] = str(worker.dir)
        return env

    def _launch(self, main: str, log: Path, env: dict[str, str], *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [str(self.home / "bin" / "spark-class"), main, *args],
            stdin=subprocess.DEVNULL, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
            cwd=self.workdir, env=env, start_new_session=True,
        )

    def _wait(self, condition, timeout: float, what: str, interval: float = 0.2):
        deadline = time.monotonic() + timeout
        while True:
            for name, proc in (("master", self.master), *((f"worker {w.index}", w.proc) for w in self.workers)):
                if proc is not None and proc.poll() is not None:
                    raise SparkClusterError(f"the Spark {name} exited with {proc.returncode} while waiting for "
                                            f"{what}:\n{self.logs()}")
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise SparkClusterError(f"timed out after {timeout:.0f}s waiting for {what}:\n{self.logs()}")
            time.sleep(interval)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def _wait_group_gone(pgid: int, timeout: float) -> None:
    """Executors are the worker's children in its process group: wait until none is left, then SIGKILL."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass

