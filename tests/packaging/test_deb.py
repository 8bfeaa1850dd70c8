"""What the .deb holds and declares, read from the archive without installing it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.packaging.conftest import MAX_PACKAGE_MB, ROOT, Built, linter_report, listed_jars

SITE = "/opt/mirrord/lib/python3.11/site-packages"
CONFFILES = ["/etc/mirrord/consumer.properties", "/etc/mirrord/mirrord.conf", "/etc/mirrord/producer.properties"]


def dpkg_deb(*args: str) -> str:
    return subprocess.run(["dpkg-deb", *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def listing(deb: Built) -> dict[str, str]:
    """Path → `dpkg-deb -c` line (mode, owner, size, link target)."""
    out = {}
    for line in dpkg_deb("-c", str(deb.path)).splitlines():
        path = line.split(None, 5)[5].split(" -> ")[0].removeprefix(".").rstrip("/") or "/"
        out[path] = line
    return out


def test_deb_is_named_after_version_and_architecture(deb: Built) -> None:
    version = dpkg_deb("-f", str(deb.path), "Version").strip()
    assert deb.path.name == f"mirrord_{version}_amd64.deb"
    assert dpkg_deb("-f", str(deb.path), "Architecture").strip() == "amd64"


def test_deb_depends_on_debian_java_17_and_python_311(deb: Built) -> None:
    depends = dpkg_deb("-f", str(deb.path), "Depends")
    assert "default-jre-headless (>= 2:1.17) | openjdk-17-jre-headless" in depends
    assert "python3 (>= 3.11)" in depends
    assert "adduser" in depends
    assert "procps" in depends  # /bin/kill for ExecReload=


def test_deb_ships_venv_jars_launcher_and_units(listing: dict[str, str]) -> None:
    for path in ("/opt/mirrord/bin/mirrord", "/opt/mirrord/pyvenv.cfg",
                 "/lib/systemd/system/mirrord.service", "/lib/systemd/system/mirrord@.service",
                 "/usr/share/doc/mirrord/copyright", *CONFFILES):
        assert path in listing, path
    assert "-> /opt/mirrord/bin/mirrord" in listing["/usr/bin/mirrord"]
    assert "-> /usr/bin/python3.11" in listing["/opt/mirrord/bin/python3.11"]
    for pkg in ("mirrord", "pyspark", "py4j", "confluent_kafka", "javaproperties", "prometheus_client", "sdnotify"):
        assert f"{SITE}/{pkg}" in listing, pkg
    jars = {Path(p).name for p in listing if p.startswith("/opt/mirrord/share/mirrord/jars/")}
    cached = {p.name for p in (ROOT / ".cache" / "jars" / "spark").glob("*.jar")}
    assert jars == cached and any(j.startswith("spark-sql-kafka-0-10") for j in jars)
    assert "mirrord-jvm.jar" in jars  # mirrord's source and writer, built from jvm/ by Maven


def test_deb_is_at_most_200_mb(deb: Built) -> None:
    assert deb.megabytes <= MAX_PACKAGE_MB, f"{deb.path.name} is {deb.megabytes:.1f} MB"


def test_deb_ships_only_the_pyspark_jars_mirrord_loads(listing: dict[str, str]) -> None:
    jars = {Path(p).name for p in listing if p.startswith(f"{SITE}/pyspark/jars/") and p.endswith(".jar")}
    assert jars == listed_jars(), f"not listed: {sorted(jars - listed_jars())}, missing: {sorted(listed_jars() - jars)}"
    assert f"{SITE}/pyspark/bin/spark-submit" in listing, "pyspark's launcher"
    assert not [p for p in listing if p.startswith((f"{SITE}/pyspark/examples/", f"{SITE}/pyspark/data/"))]


def test_deb_ships_dashboards_and_alert_rules_from_the_tree(listing: dict[str, str]) -> None:
    for src in sorted((ROOT / "etc" / "grafana").glob("*.json")):
        assert f"/usr/share/mirrord/grafana/{src.name}" in listing
    for src in sorted((ROOT / "etc" / "prometheus").glob("*.yml")):
        if not src.name.endswith(".test.yml"):
            assert f"/usr/share/mirrord/prometheus/{src.name}" in listing


def test_deb_ships_no_bytecode_and_no_pip(listing: dict[str, str]) -> None:
    assert not [p for p in listing if p.endswith(".pyc") or "__pycache__" in p]
    assert not [p for p in listing if re.search(r"site-packages/(pip|setuptools)(/|-)", p)]


def test_deb_config_is_conffiles_readable_by_root_only_until_postinst(deb: Built, listing: dict[str, str]) -> None:
    control = Path(deb.path).parent / "control"
    subprocess.run(["dpkg-deb", "-e", str(deb.path), str(control)], check=True)
    assert sorted((control / "conffiles").read_text().split()) == sorted([*CONFFILES, "/etc/default/mirrord"])
    for path in CONFFILES:
        assert listing[path].startswith("-rw-r----- root/root"), listing[path]
    assert listing["/etc/default/mirrord"].startswith("-rw-r--r-- root/root")
    for script in ("postinst", "prerm", "postrm"):
        assert subprocess.run(["sh", "-n", str(control / script)]).returncode == 0, script
    postinst = (control / "postinst").read_text()
    assert "adduser --system --group" in postinst
    assert "deb-systemd-invoke try-restart" in postinst
    assert "deb-systemd-invoke stop" in (control / "prerm").read_text()
    postrm = (control / "postrm").read_text()
    assert re.search(r'"purge".*rm -rf /var/lib/mirrord', postrm, re.S)


@pytest.mark.linter
def test_lintian_reports_no_errors(deb: Built) -> None:
    text = linter_report(deb, "lintian")
    errors = [line for line in text.splitlines() if line.startswith("E: ")]
    assert not errors, "\n".join(errors[:40])
    assert re.search(r"^exit 0$", text, re.M), text[-2000:]
