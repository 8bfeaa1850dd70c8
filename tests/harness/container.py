r"""Boot a real systemd in a throwaway Debian container, for tests of units, packages and the Ansible role.

The host is a Debian 12 machine where systemd is not PID 1 and there is no system bus, so the
tests bring their own systemd: a Debian bookworm root built once with debootstrap and cached
outside the work tree, booted as an ephemeral copy with ``systemd-nspawn -x -b``. Each container
runs in a cgroup of its own (nspawn's ``payload/`` and ``supervisor/`` would otherwise land at the
top of the host tree, where two runs collide), shares the host network (the test brokers listen
on the host's loopback), and is entered with ``nsenter -t LEADER -a``, because ``systemd-run -M``
and ``machinectl shell`` do not work without a host bus.

Usage::

    from tests.harness.container import Container, ensure_rootfs
    from tests.harness.mirrord import ROOT        # the checkout

    rootfs = ensure_rootfs()                      # about 50 s the first time, then cached
    with Container(rootfs, bind_ro=["/usr/lib/jvm", str(ROOT)]) as c:      # boots, waits for
        c.write_file("/etc/systemd/system/hello.service",                # is-system-running
                     "[Service]\nType=oneshot\nExecStart=/bin/true\n")
        c.run("systemctl", "daemon-reload")
        c.run("systemctl", "start", "hello")
        print(c.show("hello", "Result"))          # "success"
        print(c.run("journalctl", "-u", "hello", check=False).stdout)
    # the container is halted, its ephemeral copy and its cgroups removed

Ansible reaches the same container with
``-c community.docker.nsenter -e ansible_nsenter_pid=<c.leader>``. Everything here needs root.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

SUITE = "bookworm"
MIRROR = os.environ.get("MIRRORD_TEST_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# procps: /bin/kill, which the units' ExecReload= uses.
DEFAULT_INCLUDE: tuple[str, ...] = ("systemd", "systemd-sysv", "dbus", "python3", "procps")
# Bump when _prune() changes what a cached root holds, so old caches are not reused.
ROOTFS_REVISION = 2
CACHE_DIR = Path(os.environ.get("MIRRORD_TEST_CACHE", "/var/cache/mirrord-test"))
CGROUP_ROOTS = (Path("/sys/fs/cgroup/systemd"), Path("/sys/fs/cgroup/unified"))
CONTAINER_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "SYSTEMD_COLORS": "0",
    "SYSTEMD_PAGER": "",
    "TERM": "dumb",
}


class ContainerError(RuntimeError):
    """The container could not be built, booted, or a command inside it failed."""


def _require(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise ContainerError(f"missing {', '.join(missing)}: run `make system-deps` (as root)")


def rootfs_key(include: Sequence[str] = DEFAULT_INCLUDE, suite: str = SUITE) -> str:
    """Cache key of a root: what debootstrap was asked for, nothing else."""
    spec = f"{suite} minbase {','.join(sorted(include))} r{ROOTFS_REVISION}"
    return hashlib.sha256(spec.encode()).hexdigest()[:12]


def ensure_rootfs(include: Sequence[str] = DEFAULT_INCLUDE, suite: str = SUITE,
                  cache_dir: Path = CACHE_DIR) -> Path:
    """The cached bootable root for `include`, built with debootstrap on first use.

    The build goes into a temporary directory renamed into place only once complete, so an
    interrupted build is never reused; a lock file serialises concurrent first uses.
    """
    target = cache_dir / f"rootfs-{rootfs_key(include, suite)}"
    if (target / ".complete").exists():
        return target
    _require("debootstrap")
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():
            return target
        for stale in cache_dir.glob(f".build-{target.name}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        build = Path(tempfile.mkdtemp(prefix=f".build-{target.name}-", dir=cache_dir))
        try:
            proc = subprocess.run(
                ["debootstrap", "--variant=minbase", f"--include={','.join(include)}", suite, str(build), MIRROR],
                capture_output=True, text=True, check=False,
            )
            if proc.returncode != 0:
                raise ContainerError(f"debootstrap failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr}")
            _prune(build)
            build.chmod(0o755)  # mkdtemp made it 0700: the root of the container must be traversable
            (build / ".complete").write_text(f"{suite} {' '.join(include)}\n")
            if target.exists():
                shutil.rmtree(target)
            build.rename(target)
        except BaseException:
            shutil.rmtree(build, ignore_errors=True)
            raise
    return target


def _prune(root: Path) -> None:
    """Drop apt's caches and make the root boot quietly and quickly."""
    for d in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for p in (root / d).glob("*"):
            if p.is_file():
                p.unlink()
    (root / "etc/hostname").write_text("mirrord-test\n")
    # The JVM (Spark, Kafka clients) resolves the local host name at start and fails if it cannot.
    (root / "etc/hosts").write_text("127.0.0.1\tlocalhost\n127.0.1.1\tmirrord-test\n"
                                    "::1\tlocalhost ip6-localhost ip6-loopback\n")
    (root / "etc/machine-id").write_text("")
    # Units that only slow a container's boot or fail without hardware.
    wants = root / "etc/systemd/system"
    for unit in ("systemd-timesyncd.service", "apt-daily.timer", "apt-daily-upgrade.timer",
                 "e2scrub_all.timer", "fstrim.timer", "getty@tty1.service", "console-getty.service"):
        link = wants / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")


class Container:
    """One booted throwaway copy of `rootfs`; a context manager that boots and cleans up.

    `bind` / `bind_ro` take nspawn's syntax: ``"/host/path"`` or ``"/host/path:/container/path"``.
    The container shares the host's network namespace (no ``--private-network``).
    """

    def __init__(self, rootfs: Path, *, bind: Iterable[str] = (), bind_ro: Iterable[str] = (),
                 boot_timeout: float = 60, extra_args: Iterable[str] = ()) -> None:
        self.rootfs = Path(rootfs)
        self.bind = list(bind)
        self.bind_ro = list(bind_ro)
        self.boot_timeout = boot_timeout
        self.extra_args = list(extra_args)
        self.name = f"mirrord-test-{uuid.uuid4().hex[:10]}"
        self.process: subprocess.Popen | None = None
        self.leader: int | None = None
        self.copy: Path | None = None
        self.log = Path(tempfile.mkstemp(prefix=f"{self.name}-", suffix=".console.log")[1])

    # lifecycle

    def __enter__(self) -> Container:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Container:
        _require("systemd-nspawn", "nsenter")
        if os.geteuid() != 0:
            raise ContainerError("booting a container needs root")
        cgroups = self._make_cgroups()
        cmd = ["systemd-nspawn", "-q", "-D", str(self.rootfs), "-x", "-b", "--register=no", "--keep-unit",
               f"--machine={self.name}",
               *(f"--bind={b}" for b in self.bind), *(f"--bind-ro={b}" for b in self.bind_ro),
               *self.extra_args]

        def enter_own_cgroup() -> None:
            for cg in cgroups:
                (cg / "cgroup.procs").write_text("0")

        self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=open(self.log, "ab"),
                                        stderr=subprocess.STDOUT, preexec_fn=enter_own_cgroup)
        try:
            self.leader = self._wait_leader()
            self.copy = self._find_copy()
            self.wait_system_running()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 20) -> None:
        """Halt the container (SIGTERM to nspawn, as `poweroff` would), then remove its cgroups."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.leader = None
        self._remove_cgroups()
        if self.copy is not None and self.copy.exists():  # nspawn was killed before removing it
            shutil.rmtree(self.copy, ignore_errors=True)
            (self.copy.parent / f".#{self.copy.name}.lck").unlink(missing_ok=True)
        self.copy = None
        self.log.unlink(missing_ok=True)  # errors raised while it ran already quote the console

    # commands inside

    def run(self, *cmd: str, check: bool = True, timeout: float = 120, input: str | None = None,
            env: dict[str, str] | None = None, network: bool = True) -> subprocess.CompletedProcess:
        """Run `cmd` inside every namespace of the container (as root, container's PATH). `network=False`:
        in a network namespace of its own instead of the host's it shares, with no interface but a loopback
        that is down, so anything `cmd` tries to download fails."""
        if self.leader is None:
            raise ContainerError("container is not running")
        leader = str(self.leader)
        enter = ["nsenter", "-t", leader, "-a", "--"] if network else \
            ["unshare", "--net", "--", "nsenter", "-t", leader, "-m", "-u", "-i", "-p", "-r", "-w", "--"]
        full = [*enter, *cmd]
        proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout, input=input,
                              env={**CONTAINER_ENV, **(env or {})}, check=False)
        if check and proc.returncode != 0:
            raise ContainerError(f"`{shlex.join(cmd)}` exited {proc.returncode}\n{proc.stdout}{proc.stderr}")
        return proc

    def sh(self, script: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        return self.run("/bin/sh", "-ec", script, check=check, timeout=timeout)

    def show(self, unit: str, prop: str) -> str:
        """One property of a unit, e.g. ``show("mirrord", "NRestarts")`` → ``"0"``."""
        return self.run("systemctl", "show", unit, "-p", prop, "--value").stdout.strip()

    def journal(self, unit: str, after: str | None = None) -> str:
        """The unit's journal, or only what was logged after the cursor `after` (see `journal_cursor`)."""
        args = ["journalctl", "--no-pager", "-o", "short-precise", "-u", unit]
        if after:
            args += ["--after-cursor", after]
        return self.run(*args, check=False).stdout

    def journal_cursor(self) -> str:
        """A mark in the journal: `journal(unit, after=mark)` shows only what came later."""
        self.run("journalctl", "--flush", check=False)
        out = self.run("journalctl", "-n", "1", "--show-cursor", "-q", "--no-pager").stdout
        return out.rsplit("-- cursor: ", 1)[1].strip()

    def write_file(self, path: str, text: str, mode: int = 0o644) -> None:
        """Write a file inside the container (through nsenter, so it lands in the running copy)."""
        self.run("/bin/sh", "-ec", f"mkdir -p \"$(dirname {shlex.quote(path)})\"; cat > {shlex.quote(path)}; "
                 f"chmod {mode:o} {shlex.quote(path)}", input=text)

    def wait_system_running(self, timeout: float | None = None) -> str:
        """Wait until boot has finished: is-system-running says running (or degraded)."""
        deadline = time.monotonic() + (timeout or self.boot_timeout)
        state = ""
        while time.monotonic() < deadline:
            self._check_alive()
            state = self.run("systemctl", "is-system-running", check=False, timeout=10).stdout.strip()
            if state in ("running", "degraded"):
                return state
            time.sleep(0.2)
        raise ContainerError(f"container did not finish booting within the timeout (state {state!r});"
                             f" console:\n{self.console()}")

    def wait_for(self, predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.25) -> T:
        """Poll `predicate()` until it returns a truthy value; fail naming `what`."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise ContainerError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(interval)

    def console(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    # internals

    def _check_alive(self) -> None:
        if self.process is None or self.process.poll() is not None:
            rc = None if self.process is None else self.process.returncode
            raise ContainerError(f"systemd-nspawn exited ({rc}); console:\n{self.console()}")

    def _wait_leader(self) -> int:
        """PID (host namespace) of the container's init: nspawn's child, once it has exec'd systemd."""
        assert self.process is not None
        deadline = time.monotonic() + self.boot_timeout
        while time.monotonic() < deadline:
            self._check_alive()
            for child in _children(self.process.pid):
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{child}/comm").read_text().strip() == "systemd":
                        return child
            time.sleep(0.05)
        raise ContainerError(f"no container init appeared; console:\n{self.console()}")

    def _find_copy(self) -> Path | None:
        """The ephemeral copy nspawn made next to the root (``.#machine.*``), found by a marker file."""
        assert self.leader is not None
        marker = f"/etc/.{self.name}"
        with contextlib.suppress(OSError):
            Path(f"/proc/{self.leader}/root{marker}").write_text("")
            for cand in self.rootfs.parent.glob(".#machine.*"):
                if (cand / marker.lstrip("/")).exists():
                    return cand
        return None

    def _make_cgroups(self) -> list[Path]:
        made = []
        for root in CGROUP_ROOTS:
            if (root / "cgroup.procs").exists():
                cg = root / self.name
                cg.mkdir()
                made.append(cg)
        return made

    def _remove_cgroups(self) -> None:
        for root in CGROUP_ROOTS:
            top = root / self.name
            if not top.exists():
                continue
            deadline = time.monotonic() + 10
            while True:
                try:
                    for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
                        os.rmdir(dirpath)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    _kill_cgroup(top)
                    time.sleep(0.2)


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                kids += [int(c) for c in (task / "children").read_text().split()]
    return kids


def _kill_cgroup(top: Path) -> None:
    """Last resort when a cgroup will not go: SIGKILL whatever is still in it."""
    for procs in top.rglob("cgroup.procs"):
        with contextlib.suppress(OSError):
            for pid in procs.read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
