"""The container harness other tests build on: it boots a real systemd and leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.container import CGROUP_ROOTS, Container, ensure_rootfs

pytestmark = pytest.mark.system


def test_two_containers_boot_side_by_side_and_leave_no_cgroup_or_copy_behind():
    rootfs = ensure_rootfs()
    copies_before = set(rootfs.parent.glob(".#machine.*"))
    with Container(rootfs) as a, Container(rootfs) as b:
        assert a.leader != b.leader
        for c in (a, b):
            assert c.run("systemctl", "is-system-running").stdout.strip() in ("running", "degraded")
            # PID 1 of the container is systemd, in the container's own cgroup below ours.
            assert c.run("cat", "/proc/1/comm").stdout.strip() == "systemd"
            assert f"/{c.name}/" in Path(f"/proc/{c.leader}/cgroup").read_text()
        # Changes stay in one throwaway copy.
        a.write_file("/etc/mirrord-test-marker", "a\n")
        assert b.run("test", "-e", "/etc/mirrord-test-marker", check=False).returncode != 0
        assert not (rootfs / "etc" / "mirrord-test-marker").exists()
        names = (a.name, b.name)
    for root in CGROUP_ROOTS:
        for name in names:
            assert not (root / name).exists(), f"cgroup {root / name} left behind"
    assert set(rootfs.parent.glob(".#machine.*")) <= copies_before, "ephemeral copy left behind"


def test_a_killed_nspawn_is_cleaned_up_too():
    c = Container(ensure_rootfs()).start()
    copy = c.copy
    assert copy is not None and copy.exists()
    c.process.kill()
    c.process.wait(10)
    c.stop()
    assert not copy.exists(), "ephemeral copy left behind"
    assert not any((root / c.name).exists() for root in CGROUP_ROOTS), "cgroups left behind"
