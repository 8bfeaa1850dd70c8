"""The shipped units as systemd itself reads them: verify, exposure score, the properties it loads."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.system.units import UNITS, boot, install_from_tree

pytestmark = pytest.mark.system

MAX_EXPOSURE = 2.5


@pytest.fixture(scope="module")
def installed():
    """A booted systemd with the units installed as shipped (no test drop-ins)."""
    c = boot()
    try:
        install_from_tree(c, dropin=False)
        yield c
    finally:
        c.stop()


def test_systemd_analyze_verify_is_clean(installed):
    proc = installed.run("systemd-analyze", "verify", "mirrord.service", "mirrord@east.service", check=False)
    assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr


@pytest.mark.parametrize("unit", ["mirrord.service", "mirrord@.service"])
def test_exposure_score_is_at_most_2_5(unit):
    proc = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager", str(UNITS / unit)],
                          capture_output=True, text=True, check=False)
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", proc.stdout)
    assert match, proc.stdout + proc.stderr
    assert float(match.group(1)) <= MAX_EXPOSURE, proc.stdout


def test_template_instance_reads_its_own_config_state_and_environment(installed):
    show = installed.run("systemctl", "show", "mirrord@east.service", "-p",
                         "ExecStart,StateDirectory,EnvironmentFiles,WorkingDirectory,ReadWritePaths").stdout
    assert "argv[]=/usr/bin/mirrord --config /etc/mirrord/east/mirrord.conf --flow east $MIRRORD_OPTS" in show
    assert "StateDirectory=mirrord/east" in show
    assert "WorkingDirectory=/var/lib/mirrord/east" in show
    assert "ReadWritePaths=/var/lib/mirrord/east" in show
    for env in ("/etc/default/mirrord ", "/etc/sysconfig/mirrord ", "/etc/default/mirrord-east "):
        assert f"EnvironmentFiles={env}(ignore_errors=yes)" in show, show


def test_units_carry_the_health_and_restart_contract(installed):
    for unit, config in (("mirrord.service", "/etc/mirrord/mirrord.conf"),
                         ("mirrord@west.service", "/etc/mirrord/west/mirrord.conf")):
        props = dict(line.split("=", 1) for line in installed.run(
            "systemctl", "show", unit, "-p",
            "Type,NotifyAccess,Restart,RestartPreventExitStatus,TimeoutStopUSec,User,Group,"
            "KillMode,ExecReload,ExecStart,MemoryDenyWriteExecute,NoNewPrivileges,ProtectSystem,"
            "CapabilityBoundingSet,PrivateTmp,RestrictAddressFamilies").stdout.splitlines())
        assert props["Type"] == "notify" and props["NotifyAccess"] == "main", props
        assert props["Restart"] == "on-failure" and props["RestartPreventExitStatus"] == "78", props
        assert props["TimeoutStopUSec"] == "1min 30s", props
        assert props["User"] == props["Group"] == "mirrord", props
        assert props["KillMode"] == "mixed", props
        assert "path=/bin/kill ; argv[]=/bin/kill -HUP $MAINPID" in props["ExecReload"], props
        assert f"--config {config}" in props["ExecStart"], props
        # The JVM's JIT writes executable code: this must stay off.
        assert props["MemoryDenyWriteExecute"] == "no", props
        assert props["NoNewPrivileges"] == "yes" and props["ProtectSystem"] == "strict", props
        assert props["CapabilityBoundingSet"] == "" and props["PrivateTmp"] == "yes", props
        assert set(props["RestrictAddressFamilies"].split()) == {"AF_INET", "AF_INET6", "AF_UNIX"}, props
