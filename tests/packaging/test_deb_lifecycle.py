"""The .deb on a booted Debian bookworm: install, run as a service, upgrade, remove, purge.

One container for the module, the tests in lifecycle order: each one starts from the state the
previous one left, as a host would go through them. The container has no network but the host's
loopback (where the test brokers listen), so an install that downloaded anything would fail here.
"""

from __future__ import annotations

import shlex
import time
import uuid

import pytest

from tests.harness.container import Container
from tests.harness.records import create_topic, produce, read_all, wait_until
from tests.packaging.conftest import UPGRADE_SUFFIX, Built, require_root_tools, upstream_version
from tests.packaging.containers import rootfs

pytestmark = pytest.mark.system

MNT = "/mnt/packages"
TOPIC_PARTITIONS = 2
# Recent CreateTimes: the brokers' 7-day retention would delete older records under the mirror.
BASE_TIMESTAMP = int(time.time() * 1000) - 3_600_000


@pytest.fixture(scope="module")
def host(package_dir, deb: Built) -> Container:
    require_root_tools("systemd-nspawn", "nsenter", "debootstrap")
    with Container(rootfs(), bind_ro=[f"{package_dir}:{MNT}"]) as c:
        yield c


@pytest.fixture(scope="module")
def flow(kafka_pair) -> dict[str, str]:
    source, target = kafka_pair
    topic = f"pkg-{uuid.uuid4().hex[:8]}"
    create_topic(source.bootstrap, topic, TOPIC_PARTITIONS)
    return {"source": source.bootstrap, "target": target.bootstrap, "topic": topic}


def write_config(host: Container, flow: dict[str, str]) -> str:
    conf = (
        "# edited by the operator\n"
        "[mirrord]\n"
        "flow = pkgtest\n"
        "consumer.config = consumer.properties\n"
        "producer.config = producer.properties\n"
        f"whitelist = {flow['topic']}\n"
        "num.streams = 1\n"
        "\n[spark]\nspark.driver.memory = 512m\n"
    )
    host.write_file("/etc/mirrord/mirrord.conf", conf, 0o640)
    consumer = f"bootstrap.servers={flow['source']}\ngroup.id=mirrord-pkgtest\nauto.offset.reset=earliest\n"
    host.write_file("/etc/mirrord/consumer.properties", consumer, 0o640)
    host.write_file("/etc/mirrord/producer.properties",
                    f"bootstrap.servers={flow['target']}\nacks=all\nenable.idempotence=true\n", 0o640)
    host.run("chgrp", "mirrord", "/etc/mirrord/mirrord.conf", "/etc/mirrord/consumer.properties",
             "/etc/mirrord/producer.properties")
    return conf


def records(n: int, start: int = 0) -> list[dict]:
    return [{"partition": i % TOPIC_PARTITIONS, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
             "headers": [("h", f"{i}".encode())], "timestamp": BASE_TIMESTAMP + i} for i in range(start, start + n)]


def mirrored(flow: dict[str, str]) -> int:
    try:
        return sum(len(r) for r in read_all(flow["target"], flow["topic"], timeout=10).values())
    except AssertionError:
        return 0


def stat(host: Container, path: str) -> str:
    return host.run("stat", "-c", "%a %U %G", path).stdout.strip()


def journal_on_failure(host: Container, unit: str = "mirrord.service") -> str:
    return host.journal(unit)[-6000:]


def test_install_needs_nothing_from_the_network(host: Container, deb: Built) -> None:
    host.run("dpkg", "-i", f"{MNT}/{deb.path.name}", timeout=600)
    assert host.run("dpkg-query", "-W", "-f", "${Status} ${Version}", "mirrord").stdout == \
        f"install ok installed {upstream_version()}"


def test_install_creates_system_user_state_dir_and_private_config(host: Container) -> None:
    passwd = host.run("getent", "passwd", "mirrord").stdout.strip().split(":")
    assert int(passwd[2]) < 1000 and passwd[5] == "/var/lib/mirrord" and passwd[6] == "/usr/sbin/nologin"
    assert stat(host, "/var/lib/mirrord") == "750 mirrord mirrord"
    assert stat(host, "/etc/mirrord") == "750 root mirrord"
    for name in ("mirrord.conf", "consumer.properties", "producer.properties"):
        assert stat(host, f"/etc/mirrord/{name}") == "640 root mirrord"


def test_install_enables_and_starts_nothing(host: Container) -> None:
    assert host.run("systemctl", "is-enabled", "mirrord.service", check=False).stdout.strip() == "disabled"
    assert host.run("systemctl", "is-active", "mirrord.service", check=False).stdout.strip() == "inactive"


def test_installed_venv_runs_on_debian_python_with_everything_inside(host: Container) -> None:
    probe = ("import sys, pyspark, confluent_kafka, mirrord; "
             "print(sys.executable, sys.prefix, pyspark.__version__)")
    out = host.run("/opt/mirrord/bin/python", "-c", probe).stdout.split()
    assert out[1] == "/opt/mirrord"
    assert host.run("readlink", "-f", "/opt/mirrord/bin/python").stdout.strip() == "/usr/bin/python3.11"
    assert host.run("ls", "/opt/mirrord/share/mirrord/jars").stdout.count("spark-sql-kafka-0-10") == 1
    assert host.run("mirrord", "--help").returncode == 0
    # No path of the build machine survived relocation into the scripts and metadata.
    leftover = host.sh("grep -rlI -e /build/out/ -e /root/ /opt/mirrord/bin /opt/mirrord/pyvenv.cfg || true")
    assert leftover.stdout == ""
    # Bytecode was compiled by postinst, so the service (read-only /opt) does not compile at each start.
    assert host.sh("ls /opt/mirrord/lib/python3.11/site-packages/pyspark/__pycache__ | head -1").stdout


def test_service_mirrors_records_from_source_to_target(host: Container, flow: dict[str, str]) -> None:
    write_config(host, flow)
    produce(flow["source"], flow["topic"], records(20))
    host.run("systemctl", "enable", "--now", "mirrord.service", timeout=240, check=False)
    assert host.show("mirrord.service", "ActiveState") == "active", journal_on_failure(host)
    try:
        wait_until(lambda: mirrored(flow) >= 20, 120, "20 records in the target cluster")
    except AssertionError:
        pytest.fail(f"records not mirrored; journal:\n{journal_on_failure(host)}")
    got = sorted((r.key, r.value, r.headers, r.timestamp) for p in read_all(flow["target"], flow["topic"]).values()
                 for r in p)
    want = sorted((r["key"], r["value"], tuple(r["headers"]), r["timestamp"]) for r in records(20))
    assert got == want


def test_upgrade_keeps_edited_conffile_and_restarts_the_running_service(
        host: Container, flow: dict[str, str], deb_next: Built) -> None:
    before = host.run("cat", "/etc/mirrord/mirrord.conf").stdout
    assert before.startswith("# edited by the operator")
    pid_before = host.show("mirrord.service", "MainPID")
    # As unattended upgrades run it: keep the admin's version of a conffile the package also changed.
    host.run("dpkg", "-i", "--force-confdef", "--force-confold", f"{MNT}/{deb_next.path.name}", timeout=600)
    assert host.run("dpkg-query", "-W", "-f", "${Version}", "mirrord").stdout == upstream_version() + UPGRADE_SUFFIX
    assert host.run("cat", "/etc/mirrord/mirrord.conf").stdout == before
    assert stat(host, "/etc/mirrord/mirrord.conf") == "640 root mirrord"
    assert host.show("mirrord.service", "ActiveState") == "active", journal_on_failure(host)
    assert host.show("mirrord.service", "MainPID") != pid_before
    produce(flow["source"], flow["topic"], records(10, start=20))
    try:
        wait_until(lambda: mirrored(flow) >= 30, 120, "10 more records after the upgrade")
    except AssertionError:
        pytest.fail(f"records not mirrored after upgrade; journal:\n{journal_on_failure(host)}")


def test_remove_stops_the_service_and_keeps_config_and_state(host: Container) -> None:
    host.run("dpkg", "-r", "mirrord", timeout=300)
    assert host.show("mirrord.service", "ActiveState") in ("inactive", "failed")
    assert host.run("test", "-f", "/etc/mirrord/mirrord.conf", check=False).returncode == 0
    assert host.run("test", "-d", "/var/lib/mirrord", check=False).returncode == 0
    assert host.run("test", "-e", "/opt/mirrord", check=False).returncode != 0, \
        host.sh("find /opt/mirrord | head", check=False).stdout


def test_purge_removes_config_and_state_but_keeps_the_user(host: Container) -> None:
    host.run("dpkg", "-P", "mirrord", timeout=300)
    for path in ("/etc/mirrord/mirrord.conf", "/var/lib/mirrord"):
        assert host.run("test", "-e", path, check=False).returncode != 0, path
    assert host.run("getent", "passwd", "mirrord", check=False).returncode == 0
    links = host.sh("ls /etc/systemd/system/multi-user.target.wants/ | grep mirrord || true").stdout
    assert links == "", shlex.quote(links)
