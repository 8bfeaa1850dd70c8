"""The container harness other tests build on: it boots a real systemd and leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.container import CGROUP_ROOTS, Container, ensure_rootfs

pytestmark = pytest.mark.system


def test_containers_boot_side_by_side_and_leave_nothing_behind_even_when_nspawn_is_killed():
    rootfs = ensure_rootfs()
    copies_before = set(rootfs.parent.glob(".#machine.*"))
    a, b = Container(rootfs), Container(rootfs)
    try:
        a.start()
        b.start()
        assert a.leader != b.leader
        for c in (a, b):
            assert c.run("systemctl", "is-system-running").stdout.strip() in ("running", "degraded")
            # PID 1 of the container is systemd, in a cgroup of the container's own.
            assert c.run("cat", "/proc/1/comm").stdout.strip() == "systemd"
            assert f"/{c.name}/" in Path(f"/proc/{c.leader}/cgroup").read_text()
        # Changes stay in one throwaway copy.
        a.write_file("/etc/mirrord-test-marker", "a\n")
        assert b.run("test", "-e", "/etc/mirrord-test-marker", check=False).returncode != 0
        assert not (rootfs / "etc" / "mirrord-test-marker").exists()
        # b's nspawn dies without cleaning up: stop() still removes its copy and cgroups.
        assert b.copy is not None and b.copy.exists()
        b.process.kill()
        b.process.wait(10)
    finally:
        a.stop()
        b.stop()
    for c in (a, b):
        assert not any((root / c.name).exists() for root in CGROUP_ROOTS), f"cgroups of {c.name} left behind"
    assert set(rootfs.parent.glob(".#machine.*")) <= copies_before, "ephemeral copy left behind"
