"""The .deb on a booted Debian bookworm: install, run as a service, upgrade, remove, purge.

One container for the module, the tests in lifecycle order: each one starts from the state the
previous one left, as a host would go through them. The container has no network but the host's
loopback (where the test brokers listen), so an install that downloaded anything would fail here.

The package ships only the pyspark jars of packaging/spark-jars.txt, so the installed package is also
run in every mode mirrord supports (each trigger with a transform over SASL and SSL, a spark://
master, `--check` of every setting): a jar missing from the list fails one of them.
"""

from __future__ import annotations

import contextlib
import shlex
import time
import urllib.request
import uuid
from collections.abc import Iterator

import pytest

from mirrord.settings import config
from tests.harness.container import Container
from tests.harness.jvm import packaged_driver_options
from tests.harness.kafka import SCRAM_USER, KafkaBroker, free_port
from tests.harness.mirrord import metric_value
from tests.harness.records import committed_offsets, create_topic, end_offsets, produce, read_all, wait_until
from tests.harness.spark_cluster import SparkStandalone
from tests.packaging.conftest import UPGRADE_SUFFIX, Built, require_root_tools, upstream_version
from tests.packaging.containers import rootfs

pytestmark = pytest.mark.system

MNT = "/mnt/packages"
TOPIC_PARTITIONS = 2
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
# Applied to the `-dev` topic of each trigger mode's flow; dev_records() says what it must leave.
DEV_TRANSFORM = """
[transform:dev]
topics = {topic}
filter = CAST(value AS STRING) NOT LIKE 'audit%'
value = regexp_replace(CAST(value AS STRING), 'secret-[0-9]+', '***')
drop.headers = (?i)authorization
"""
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


def configure_instance(host: Container, name: str, settings: dict[str, str], consumer: dict[str, str],
                       producer: dict[str, str], sections: str = "", spark: dict[str, str] | None = None,
                       files: dict[str, str] | None = None) -> str:
    """/etc/mirrord/NAME/ as an operator writes it for mirrord@NAME.service (0640 root:mirrord); its
    mirrord.conf's path."""
    folder = f"/etc/mirrord/{name}"
    spark = {"spark.driver.memory": "512m", "spark.driver.extraJavaOptions": packaged_driver_options(), **(spark or {})}
    conf = ("[mirrord]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items()) + sections
            + "\n[spark]\n" + "".join(f"{k} = {v}\n" for k, v in spark.items()))
    contents = {"mirrord.conf": conf, "consumer.properties": properties(consumer),
                "producer.properties": properties(producer), **(files or {})}
    for file, text in contents.items():
        host.write_file(f"{folder}/{file}", text, 0o640)
    host.sh(f"chgrp mirrord {folder}/*; chgrp mirrord {folder}; chmod 0750 {folder}")
    return f"{folder}/mirrord.conf"


def properties(values: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


def secured_clients(source: KafkaBroker, target: KafkaBroker, group: str, folder: str) -> tuple[dict, dict]:
    """The source over SASL_PLAINTEXT with SCRAM-SHA-512, the target over SSL trusting FOLDER/ca.pem."""
    password = source.scram_users[SCRAM_USER]
    consumer = {"bootstrap.servers": source.sasl_bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": f'{SCRAM} required username="{SCRAM_USER}" password="{password}";'}
    producer = {"bootstrap.servers": target.ssl_bootstrap, "acks": "all", "enable.idempotence": "true",
                "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": f"{folder}/ca.pem"}
    return consumer, producer


def by_partition(records: dict) -> dict[int, list[tuple]]:
    return {p: [r.fields() for r in rs] for p, rs in records.items()}


def wait_mirrored(host: Container, unit: str, source: str, group: str, *topics: str) -> None:
    """Until the flow's group on the source has committed every topic's end: all of it acknowledged by the target."""
    for topic in topics:
        ends = end_offsets(source, topic)
        try:
            wait_until(lambda t=topic, e=ends: committed_offsets(source, group, t) == e, 180, f"{topic} mirrored")
        except AssertionError as exc:
            pytest.fail(f"{exc}; journal of {unit}:\n{journal_on_failure(host, unit)}")


@contextlib.contextmanager
def running(host: Container, unit: str) -> Iterator[None]:
    """The unit started (READY=1 within its TimeoutStartSec) and, after the block, stopped cleanly; stopped
    anyway when the block fails, so that a failing flow does not restart in a loop behind the next tests."""
    host.run("systemctl", "start", unit, timeout=240, check=False)
    try:
        assert host.show(unit, "ActiveState") == "active", journal_on_failure(host, unit)
        yield
    except BaseException:
        host.run("systemctl", "stop", unit, timeout=120, check=False)
        raise
    host.run("systemctl", "stop", unit, timeout=120)
    assert host.show(unit, "Result") == "success", journal_on_failure(host, unit)


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
        f"spark.driver.extraJavaOptions = {packaged_driver_options()}\n"
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


def dev_records(n: int) -> tuple[list[dict], dict[int, list[tuple]]]:
    """Records for DEV_TRANSFORM, and what it leaves of them by partition (Record.fields() of each)."""
    sent, kept = records(n), {p: [] for p in range(TOPIC_PARTITIONS)}
    for i, r in enumerate(sent):
        r["value"] = f"audit {i}".encode() if i % 4 == 0 else f"order {i} secret-{i * 7}".encode()
        r["headers"] = [("trace", f"{i}".encode()), ("Authorization", b"Bearer t0ken")]
        if i % 4:
            kept[r["partition"]].append((r["partition"], r["key"], f"order {i} ***".encode(),
                                         (("trace", f"{i}".encode()),), r["timestamp"]))
    return sent, kept


def mirrored(flow: dict[str, str]) -> int:
    try:
        return sum(len(r) for r in read_all(flow["target"], flow["topic"], timeout=10).values())
    except AssertionError:
        return 0


def stat(host: Container, path: str) -> str:
    return host.run("stat", "-c", "%a %U %G", path).stdout.strip()


def journal_on_failure(host: Container, unit: str = "mirrord.service") -> str:
    """The unit's journal without systemd's line per process it kills (a JVM's threads drown the cause)."""
    return "\n".join(line for line in host.journal(unit).splitlines() if "Killing process" not in line)[-6000:]


def test_install_needs_nothing_from_the_network(host: Container, deb: Built, kafka_pair) -> None:
    # The container shares the host's network (its brokers listen there): the install alone runs in a
    # network namespace of its own, where a download (pip, Maven, apt) would fail the install.
    port = kafka_pair[0].bootstrap.rsplit(":", 1)[1]
    probe = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 2)\nexcept OSError:\n    exit(3)"
    assert host.run("python3", "-c", probe, check=False).returncode == 0  # the container reaches the brokers
    assert host.run("python3", "-c", probe, check=False, network=False).returncode == 3  # the install does not
    assert host.run("sh", "-c", "getent hosts deb.debian.org || echo no-dns", network=False).stdout.strip() == "no-dns"
    host.run("dpkg", "-i", f"{MNT}/{deb.path.name}", timeout=600, network=False)
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


@pytest.mark.parametrize(("mode", "codec"), [("real-time", "snappy"), ("micro-batch", "zstd")])
def test_each_trigger_mode_mirrors_over_sasl_and_ssl_through_a_transform(
        host: Container, kafka_pair: tuple[KafkaBroker, KafkaBroker], mode: str, codec: str) -> None:
    source, target = kafka_pair
    name = mode.replace("-", "")
    unit, folder, p = f"mirrord@{name}.service", f"/etc/mirrord/{name}", f"pkg-{name}-{uuid.uuid4().hex[:8]}"
    plain, dev, group = f"{p}-plain", f"{p}-dev", f"{p}-mirror"
    sent, kept = dev_records(200)
    for topic, batch in ((plain, records(300)), (dev, sent)):
        create_topic(source.bootstrap, topic, TOPIC_PARTITIONS)
        produce(source.bootstrap, topic, batch, {"compression.type": codec})
    consumer, producer = secured_clients(source, target, group, folder)
    metrics = f"127.0.0.1:{free_port()}"
    settings = {"trigger": mode, "whitelist": f"{p}-.*", "metrics.listen": metrics, "checkpoint.interval.ms": "5000"}
    configure_instance(host, name, settings, consumer, {**producer, "compression.type": codec},
                       DEV_TRANSFORM.format(topic=dev), files={"ca.pem": target.tls.ca.read_text()})
    with running(host, unit):
        wait_mirrored(host, unit, source.bootstrap, group, plain, dev)
        with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as r:
            assert metric_value(r.read().decode(), "mirrord_mode", mode=mode) == 1, journal_on_failure(host, unit)
    assert by_partition(read_all(target.bootstrap, plain)) == by_partition(read_all(source.bootstrap, plain))
    assert by_partition(read_all(target.bootstrap, dev)) == kept


def test_a_spark_standalone_master_runs_the_installed_driver(
        host: Container, kafka_pair: tuple[KafkaBroker, KafkaBroker]) -> None:
    """The cluster is the host's full pyspark (tests.harness.spark_cluster); the driver is the package's, its
    executors fetch the package's connector jars from it over the loopback the container shares."""
    source, target = kafka_pair
    topic = f"pkg-standalone-{uuid.uuid4().hex[:8]}"
    create_topic(source.bootstrap, topic, TOPIC_PARTITIONS)
    produce(source.bootstrap, topic, records(300))
    unit, group = "mirrord@standalone.service", f"{topic}-mirror"
    with SparkStandalone() as cluster:
        configure_instance(host, "standalone", {"whitelist": topic, "spark.master": cluster.url, "metrics.listen": ""},
                           {"bootstrap.servers": source.bootstrap, "group.id": group, "auto.offset.reset": "earliest"},
                           {"bootstrap.servers": target.bootstrap, "acks": "all", "enable.idempotence": "true"},
                           spark={"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                                  "spark.executor.memory": "512m"})
        with running(host, unit):
            wait_mirrored(host, unit, source.bootstrap, group, topic)
            apps = [a for a in cluster.applications() if a["name"] == "mirrord-standalone"]
            assert [a["state"] for a in apps] == ["RUNNING"], cluster.state()
            # by default a stream per slot but the spare: real-time mode, whose task ends only with its batch
            wait_until(lambda: "Running task" in cluster.executor_logs(tail=None), 60,
                       "a task running in the worker's executor")
    assert by_partition(read_all(target.bootstrap, topic)) == by_partition(read_all(source.bootstrap, topic))


def test_check_passes_on_a_configuration_using_every_feature(
        host: Container, kafka_pair: tuple[KafkaBroker, KafkaBroker]) -> None:
    source, target = kafka_pair
    folder = "/etc/mirrord/every"
    consumer, producer = secured_clients(source, target, "every-mirror", folder)
    settings = {
        "flow": "every", "consumer.config": "consumer.properties", "producer.config": "producer.properties",
        "whitelist": "prd-.*,ops-.*", "topics.exclude": "prd-internal-.*", "trigger": "real-time",
        "checkpoint.interval.ms": "10000", "num.streams": "3", "offset.commit.interval.ms": "500",
        "abort.on.send.failure": "false", "sync.topic.configs.enabled": "true",
        "sync.topic.configs.interval.seconds": "300", "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "30", "groups": "app-.*", "groups.exclude": "app-test-.*",
        "emit.checkpoints.enabled": "true", "emit.checkpoints.interval.seconds": "30",
        "emit.heartbeats.enabled": "true", "emit.heartbeats.interval.seconds": "2",
        "sync.topic.acls.enabled": "true", "sync.topic.acls.interval.seconds": "300",
        "state.dir": "/var/lib/mirrord", "metrics.listen": "127.0.0.1:9646", "replication.policy": "prefix",
        "source.alias": "east", "target.alias": "west", "replication.policy.separator": "_",
        "spark.master": "spark://127.0.0.1:7077", "max.offsets.per.trigger": "100000", "offset.lag.max": "50",
        "stall.timeout.ms": "60000", "leader.election.enabled": "true", "leader.session.timeout.ms": "15000",
        "delivery": "exactly-once", "transaction.interval.ms": "200", "offset.syncs.retire.enabled": "false",
    }
    assert set(settings) == set(config.KEYS), "a setting of mirrord.conf is missing here"
    sections = """
[transform:sample]
topics = prd-.*
sample = 0.5
filter = get_json_object(CAST(value AS STRING), '$.kind') <> 'audit'

[transform:mask]
topics = prd-orders
key = concat('dev-', CAST(key AS STRING))
value = regexp_replace(CAST(value AS STRING), '"email":"[^"]*"', '"email":"***"')
drop.headers = (?i)authorization
"""
    conf = configure_instance(host, "every", settings, {**consumer, "client.id": "every"},
                              {**producer, "compression.type": "lz4", "linger.ms": "5"}, sections,
                              spark={"spark.driver.host": "127.0.0.1", "spark.executor.memory": "512m"},
                              files={"ca.pem": target.tls.ca.read_text()})
    done = host.run("mirrord", "--config", conf, "--check", check=False, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith("mirrord: configuration OK;"), done.stdout + done.stderr


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
