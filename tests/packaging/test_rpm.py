"""The .rpm: the same tree as the .deb, config(noreplace), user creation and systemd scriptlets."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.packaging.conftest import MAX_PACKAGE_MB, Built, linter_report, listed_jars

CONFIG = ["/etc/mirrord/consumer.properties", "/etc/mirrord/mirrord.conf", "/etc/mirrord/producer.properties"]


def rpm_query(built: Built, *args: str) -> str:
    return subprocess.run(["rpm", "-qp", *args, str(built.path)], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def files(rpm: Built) -> dict[str, tuple[str, str, str, str]]:
    """Path → (mode, user, group, flags) of every file in the package."""
    out = {}
    for line in rpm_query(rpm, "--qf", "[%{FILEMODES:perms} %{FILEUSERNAME} %{FILEGROUPNAME} "
                                       "%{FILEFLAGS:fflags} %{FILENAMES}\n]").splitlines():
        mode, user, group, flags, path = line.split(" ", 4)
        out[path] = (mode, user, group, flags)
    return out


def test_rpm_ships_the_same_layout_as_the_deb(files: dict) -> None:
    for path in ("/opt/mirrord/bin/mirrord", "/opt/mirrord/bin/python3.11", "/usr/bin/mirrord",
                 "/usr/lib/systemd/system/mirrord.service", "/usr/lib/systemd/system/mirrord@.service",
                 "/opt/mirrord/lib/python3.11/site-packages/pyspark/__init__.py", *CONFIG):
        assert path in files, path
    assert any(p.startswith("/opt/mirrord/share/mirrord/jars/spark-sql-kafka-0-10") for p in files)
    assert not [p for p in files if p.endswith(".pyc") or "/.build-id/" in p]


def test_rpm_is_at_most_200_mb(rpm: Built) -> None:
    assert rpm.megabytes <= MAX_PACKAGE_MB, f"{rpm.path.name} is {rpm.megabytes:.1f} MB"


def test_rpm_ships_only_the_pyspark_jars_mirrord_loads(files: dict) -> None:
    folder = "/opt/mirrord/lib/python3.11/site-packages/pyspark/jars/"
    assert {p.removeprefix(folder) for p in files if p.startswith(folder) and p.endswith(".jar")} == listed_jars()


def test_rpm_config_is_noreplace_and_private_to_the_service(files: dict) -> None:
    for path in CONFIG:
        mode, user, group, flags = files[path]
        assert (mode, user, group) == ("-rw-r-----", "root", "mirrord"), path
        assert "c" in flags and "n" in flags, f"{path} is not %config(noreplace): {flags}"
    assert files["/etc/sysconfig/mirrord"] == ("-rw-r--r--", "root", "root", "cn")
    assert files["/etc/mirrord"][:3] == ("drwxr-x---", "root", "mirrord")
    assert files["/var/lib/mirrord"][:3] == ("drwxr-x---", "mirrord", "mirrord")


def test_rpm_requires_python311_and_java17(rpm: Built) -> None:
    requires = rpm_query(rpm, "--requires")
    assert "/usr/bin/python3.11" in requires
    assert re.search(r"^jre-headless >= 1:17$", requires, re.M)
    assert "libgfortran" not in requires, "dependencies computed from the bundled wheels"


def test_rpm_scriptlets_create_the_user_and_drive_systemd(rpm: Built) -> None:
    scripts = rpm_query(rpm, "--scripts")
    pre = scripts.split("preinstall scriptlet")[1].split("scriptlet")[0]
    assert "groupadd -r mirrord" in pre and "useradd -r -g mirrord" in pre
    assert re.search(r"preuninstall scriptlet.*\$1 -eq 0.*disable --now mirrord\.service", scripts, re.S)
    assert re.search(r"postuninstall scriptlet.*\$1 -ge 1.*try-restart mirrord\.service 'mirrord@\*\.service'",
                     scripts, re.S)
    for part in scripts.split("scriptlet (using /bin/sh):")[1:]:
        body = part.rsplit("\n", 2)[0] if "scriptlet" in part else part
        assert subprocess.run(["sh", "-n"], input=body, text=True).returncode == 0, body


@pytest.mark.linter
def test_rpmlint_reports_no_errors_beyond_the_accepted_ones(rpm: Built) -> None:
    text = linter_report(rpm, "rpmlint")
    errors = [line for line in text.splitlines() if ": E: " in line]
    assert not errors, "\n".join(errors[:40])
