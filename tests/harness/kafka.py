"""Start and stop real Apache Kafka brokers (KRaft, combined broker+controller) on loopback.

The jars come from `make jars` (Maven Central, cached under .cache/jars/kafka). Each broker
gets ephemeral ports and a data directory of its own, and is stopped by PID.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness.jvm import kafka_options
from tests.harness.tls import Tls, make_tls

ROOT = Path(__file__).resolve().parents[2]
KAFKA_JARS = Path(os.environ.get("MIRRORD_KAFKA_JARS", ROOT / ".cache" / "jars" / "kafka"))

LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


_GIVEN: set[int] = set()  # ports free_port handed out in this process: the kernel may offer a released one again


def free_port() -> int:
    """A loopback port nothing listens on, and not one this process was given before (two calls in a row could get
    the same port back, and a broker's two listeners on one port refuse to start)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def classpath() -> str:
    if not (KAFKA_JARS / "kafka-server-common-4.2.0.jar").exists() and not any(KAFKA_JARS.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"Kafka jars missing in {KAFKA_JARS}: run `make jars`")
    return str(KAFKA_JARS / "*")


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def run_class(main: str, *args: str, timeout: float = 120, heap: str = "256m") -> subprocess.CompletedProcess:
    """Run one of Kafka's command-line classes (kafka-topics, kafka-consumer-groups, ...)."""
    return subprocess.run(
        [java(), f"-Xmx{heap}", *kafka_options(), "-cp", classpath(), main, *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )


@dataclass
class KafkaBroker:
    """One single-node KRaft cluster. `start()` returns once it answers metadata requests and says it started."""

    name: str
    workdir: Path
    port: int = 0
    controller_port: int = 0
    heap: str = "512m"
    extra: dict[str, str] = field(default_factory=dict)
    jvm_options: list[str] = field(default_factory=kafka_options)  # the tests' (tests/harness/jvm.py)
    process: subprocess.Popen | None = None
    scram_users: dict[str, str] = field(default_factory=dict, repr=False)  # a SASL_PLAINTEXT listener, SCRAM-SHA-512
    tls: Tls | None = None  # an SSL listener, its key and certificate in PEM
    sasl_port: int = 0
    ssl_port: int = 0
    _log_from: int = field(default=0, repr=False)  # the server log's size at the last launch

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    def _secured(self) -> tuple[list[tuple[str, int]], dict[str, str]]:
        """The SASL and SSL listeners, (name, port) each, and their settings; inter-broker stays PLAINTEXT."""
        listeners, props = [], {}
        if self.scram_users:
            self.sasl_port = self.sasl_port or free_port()
            listeners.append(("SASL_PLAINTEXT", self.sasl_port))
            props.update({
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            })
        if self.tls is not None:
            self.ssl_port = self.ssl_port or free_port()
            listeners.append(("SSL", self.ssl_port))
            props.update({"listener.name.ssl.ssl.keystore.type": "PEM",
                          "listener.name.ssl.ssl.keystore.location": str(self.tls.keystore),
                          "listener.name.ssl.ssl.client.auth": "none"})
        return listeners, props

    @property
    def log_file(self) -> Path:
        return self.workdir / "server.log"

    def _write_config(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        self.controller_port = self.controller_port or free_port()
        secured, secured_props = self._secured()
        advertised = ",".join([f"PLAINTEXT://127.0.0.1:{self.port}", *(f"{n}://127.0.0.1:{p}" for n, p in secured)])
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"{advertised},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(
                ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT", *(f"{n}:{n}" for n, _ in secured)]),
            **secured_props,
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "log.flush.interval.messages": "9223372036854775807",
            **self.extra,
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.workdir / "log4j2.properties").write_text(LOG4J2.format(log=self.log_file))
        return path

    def start(self, timeout: float = 90) -> KafkaBroker:
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        config = self._write_config()
        self._log_from = self.log_file.stat().st_size if self.log_file.exists() else 0
        data = self.workdir / "data"
        if not (data / "meta.properties").exists():
            scram = [arg for name, password in self.scram_users.items()
                     for arg in ("--add-scram", f"SCRAM-SHA-512=[name={name},password={password}]")]
            fmt = run_class("kafka.tools.StorageTool", "format", "-t", uuid.uuid4().hex[:22],
                            "-c", str(config), "--ignore-formatted", *scram)
            if fmt.returncode != 0:
                raise RuntimeError(f"kafka storage format failed for {self.name}: {fmt.stderr or fmt.stdout}")
        env = dict(os.environ, KAFKA_HEAP_OPTS="")
        self.process = subprocess.Popen(
            [java(), f"-Xmx{self.heap}", f"-Xms{self.heap}", "-XX:+UseG1GC", *self.jvm_options,
             f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
             "-cp", classpath(), "kafka.Kafka", str(config)],
            stdout=open(self.workdir / "stdout.log", "ab"), stderr=subprocess.STDOUT,
            env=env, start_new_session=True,
        )

    def wait_ready(self, timeout: float = 90) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        admin = None
        while time.monotonic() < deadline:
            if self.process and self.process.poll() is not None:
                raise RuntimeError(f"broker {self.name} exited with {self.process.returncode}; see {self.log_file}")
            try:
                if admin is None:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    admin = AdminClient({"bootstrap.servers": self.bootstrap})
                md = admin.list_topics(timeout=2)
                if md.brokers and self._started():
                    return
            except RuntimeError:
                raise
            except (OSError, Exception):  # noqa: BLE001 - not up yet; retried until the deadline
                pass
            time.sleep(0.1)
        raise RuntimeError(f"broker {self.name} not ready after {timeout}s; see {self.log_file}")

    def _started(self) -> bool:
        """The broker says it started, since its last launch: one whose later listener could not bind its port
        answers on PLAINTEXT for a moment, then shuts its sockets and may linger as a process."""
        try:
            with open(self.log_file, "rb") as log:
                log.seek(self._log_from)
                said = log.read()
        except OSError:
            return False
        if b"Fatal error during broker startup" in said:
            raise RuntimeError(f"broker {self.name} failed to start; see {self.log_file}")
        return b"Kafka Server started" in said

    def start_fresh(self, timeout: float = 90) -> None:
        """The first start, launched already: the ports free_port() found free a moment before may have been taken
        meanwhile (another lane's client connecting from an ephemeral port), so a broker that could not bind one is
        started again on new ones, twice at most. Later starts (a bounced broker) keep their ports."""
        for attempt in range(3):
            try:
                self.wait_ready(timeout)
                return
            except RuntimeError:
                taken = "Address already in use" in self.log_file.read_text(errors="replace")
                if attempt == 2 or not taken:
                    raise
            self.stop(kill=True)
            self.log_file.rename(self.log_file.with_suffix(f".port-taken-{attempt}.log"))
            self.port = self.controller_port = self.sasl_port = self.ssl_port = 0
            self.launch()

    def stop(self, kill: bool = False) -> None:
        if not self.process or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def destroy(self) -> None:
        self.stop(kill=True)
        shutil.rmtree(self.workdir, ignore_errors=True)


SCRAM_USER = "mirror"
# ACLs as production clusters have them (topic ACL sync is tested against them); a resource without
# any ACL stays open to every principal, and the PLAINTEXT listeners' ANONYMOUS is a super user.
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true", "super.users": "User:ANONYMOUS"}


def start_pair(workdir: Path, jvm_options: list[str] | None = None) -> tuple[KafkaBroker, KafkaBroker]:
    """A source and a target cluster, started side by side, each with a SASL_PLAINTEXT (SCRAM-SHA-512,
    user SCRAM_USER with a password made for this session) and an SSL listener beside PLAINTEXT, and
    StandardAuthorizer; `jvm_options` None: the tests' (kafka_options)."""
    tls = make_tls(workdir / "tls")
    users = {SCRAM_USER: f"pw-{uuid.uuid4().hex}"}
    options = {} if jvm_options is None else {"jvm_options": jvm_options}
    source = KafkaBroker("source", workdir / "source", scram_users=users, tls=tls, extra=AUTHORIZER, **options)
    target = KafkaBroker("target", workdir / "target", scram_users=users, tls=tls, extra=AUTHORIZER, **options)
    source.launch()
    target.launch()
    source.start_fresh()
    target.start_fresh()
    return source, target
