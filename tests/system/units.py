"""mirrord "installed from the tree" into a booted container, the way the package lays it out.

The units go to /lib/systemd/system as shipped; what differs from a package install lives in one
drop-in: JAVA_HOME, the Spark Kafka jars of the tree, and the tree's Python (pyenv, under /root,
which the unit's ProtectHome= hides: only that directory is exposed again, read-only).
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.harness.container import Container, ensure_rootfs

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "systemd"
VENV = ROOT / ".venv"
JAVA_HOME = Path(os.environ.get("MIRRORD_TEST_JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64"))
SPARK_JARS = Path(os.environ.get("MIRRORD_SPARK_JARS", ROOT / ".cache" / "jars" / "spark"))
# Debian's JDK keeps its security and trust configuration under /etc, linked from /usr/lib/jvm.
JDK_ETC = ("/etc/java-17-openjdk", "/etc/ssl/certs/java")


def python_home() -> Path:
    """The interpreter the tree's venv runs on (e.g. /root/.pyenv/versions/3.11.7)."""
    return Path(os.path.realpath(VENV / "bin" / "python3")).parents[1]


# The container's /tmp is a tmpfs of its own, which would hide a tree cloned under the host's /tmp: such a
# tree is bound here instead, and reached at its own path through a symlink (and, in the unit's private
# /tmp, a bind).
TREE_ELSEWHERE = "/opt/mirrord-tree"


def _under_tmp() -> bool:
    return ROOT.is_relative_to("/tmp")


def tree_binds() -> list[str]:
    """Read-only binds that let the container run mirrord from this tree without network."""
    binds = [f"{ROOT}:{TREE_ELSEWHERE}" if _under_tmp() else str(ROOT), "/usr/lib/jvm", str(python_home())]
    binds += [p for p in JDK_ETC if Path(p).exists()]
    return binds


def from_tree_dropin() -> str:
    lines = ["[Service]", f"Environment=JAVA_HOME={JAVA_HOME}", f"Environment=MIRRORD_SPARK_JARS={SPARK_JARS}"]
    home = python_home()
    if home.is_relative_to("/root") or home.is_relative_to("/home"):
        lines += ["ProtectHome=tmpfs", f"BindReadOnlyPaths={home}"]
    if _under_tmp():  # PrivateTmp= gives the unit an empty /tmp: the tree is bound into it where it lives
        lines += [f"BindReadOnlyPaths={TREE_ELSEWHERE}:{ROOT}"]
    return "\n".join(lines) + "\n"


def boot() -> Container:
    c = Container(ensure_rootfs(), bind_ro=tree_binds()).start()
    if _under_tmp():
        c.run("mkdir", "-p", str(ROOT.parent))
        c.run("ln", "-s", TREE_ELSEWHERE, str(ROOT))
    return c


def install_from_tree(c: Container, dropin: bool = True) -> None:
    """The mirrord user, /usr/bin/mirrord, the units as shipped, /etc/mirrord (0750 root:mirrord)."""
    c.run("useradd", "--system", "--user-group", "--home-dir", "/var/lib/mirrord", "--no-create-home",
          "--shell", "/usr/sbin/nologin", "mirrord")
    c.run("ln", "-sf", str(VENV / "bin" / "mirrord"), "/usr/bin/mirrord")
    for unit in ("mirrord.service", "mirrord@.service"):
        c.write_file(f"/lib/systemd/system/{unit}", (UNITS / unit).read_text())
        if dropin:
            c.write_file(f"/etc/systemd/system/{unit}.d/10-from-tree.conf", from_tree_dropin())
    c.run("install", "-d", "-m", "0750", "-o", "root", "-g", "mirrord", "/etc/mirrord")
    c.run("systemctl", "daemon-reload")


def install_config(c: Container, directory: str, files: dict[str, str]) -> None:
    """Configuration files as an operator installs them: 0640 root:mirrord."""
    c.run("install", "-d", "-m", "0750", "-o", "root", "-g", "mirrord", directory)
    for name, text in files.items():
        path = f"{directory}/{name}"
        c.write_file(path, text, mode=0o640)
        c.run("chown", "root:mirrord", path)


def flow_files(host_dir: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in host_dir.iterdir() if p.is_file() and p.suffix in (".conf", ".properties")}


def unit_state(c: Container, unit: str) -> dict[str, str]:
    props = "ActiveState,SubState,Result,NRestarts,ExecMainStatus,ExecMainCode,MainPID,StatusText"
    out = c.run("systemctl", "show", unit, "-p", props).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
