"""A flow's definition: everything the data path needs, derived once from Settings.

The replication policy and the subscribe pattern, the Kafka source's and sink's options translated
from the two .properties files (each judged first by librdkafka, then by Kafka's own Java client, as
Spark would load it), and the librdkafka settings of mirrord's admin clients.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import BinaryIO

from mirrord.errors import MirrordError
from mirrord.fencing.timing import bound_producer
from mirrord.jars import connector_jars
from mirrord.settings import translate
from mirrord.settings.config import ClientConfig, Settings
from mirrord.settings.policy import Policy, make_policy, subscribe_pattern
from mirrord.settings.policy import offset_syncs_topic as mm2_offset_syncs_topic
from mirrord.settings.redact import SECRET_KEY, dataclass_repr, redact

log = logging.getLogger(__name__)


Outcome = translate.JaasLogin | MirrordError | None


@dataclass(frozen=True)
class JavaClientCheck:
    """What Kafka's own Java clients said of each .properties file, by kind (`producer`, `consumer`)."""

    outcomes: Mapping[str, Outcome]

    def login(self, kind: str) -> translate.JaasLogin | None:
        """The file's sasl.jaas.config as Kafka's own parser read it (None without one); raises the file's
        first problem as its ConfigError, or why it could not be checked."""
        outcome = self.outcomes[kind]
        if isinstance(outcome, MirrordError):
            raise outcome
        return outcome


def check_java_clients(*files: tuple[ClientConfig, str]) -> JavaClientCheck:
    """Let Kafka's own Java clients judge .properties files (`io.mirrord.check.ClientConfigCheck`), as they would
    at start inside Spark, where an unknown key is only a warning: a typo is a config error here.

    One JVM judges every file (`kind` is `producer` or `consumer`). Each is opened here, as a file that
    cannot be read is mirrord's to report, and read there through /dev/fd: whatever the characters of its
    name and the locale, the JVM reads the file opened. A file's problems are not raised here: `login(kind)`,
    asked file by file in the caller's order, raises them as when each file had a JVM of its own."""
    command = _java_check_command()
    outcomes: dict[str, Outcome] = {}
    with contextlib.ExitStack() as stack:
        opened: dict[str, tuple[ClientConfig, BinaryIO]] = {}
        for cfg, kind in files:
            try:
                opened[kind] = (cfg, stack.enter_context(open(cfg.path, "rb")))
            except OSError as exc:
                outcomes[kind] = MirrordError(f"cannot check {cfg.path} with Kafka's Java {kind}: {exc}")
        if opened:
            outcomes.update(_judge(command, opened))
    return JavaClientCheck({kind: outcomes[kind] for _, kind in files})


def _java_check_command() -> list[str]:
    """`java ... io.mirrord.check.ClientConfigCheck`, its arguments left out."""
    import pyspark

    slf4j = sorted((Path(pyspark.__file__).parent / "jars").glob("slf4j-api-*.jar"))
    classpath = os.pathsep.join([*connector_jars(), *map(str, slf4j)])
    java = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME") else "java"
    return [java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath,
            f"-Dmirrord.secret.keys={SECRET_KEY.pattern}", "io.mirrord.check.ClientConfigCheck"]


def _judge(command: list[str], opened: Mapping[str, tuple[ClientConfig, BinaryIO]]) -> dict[str, Outcome]:
    """Every opened file's outcome, from one JVM (`KIND=/dev/fd/N` arguments): its lines on stdout and
    stderr start with its kind; it exits 2 if a file could not be read, else 1 if one has a problem."""
    fds = {kind: properties.fileno() for kind, (_, properties) in opened.items()}
    try:
        done = subprocess.run([*command, *(f"{kind}=/dev/fd/{fd}" for kind, fd in fds.items())],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False,
                              pass_fds=tuple(fds.values()), start_new_session=True)  # signals are mirrord's
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {kind: MirrordError(f"cannot check {cfg.path} with Kafka's Java {kind}: {exc}")
                for kind, (cfg, _) in opened.items()}
    stderr = done.stderr.decode("utf-8", "replace")
    out, err = _by_kind(done.stdout.decode("utf-8", "replace"), opened), _by_kind(stderr, opened)
    problems = {kind: any(line.count("\t") == 1 for line in out[kind]) for kind in opened}  # jaas lines: 4 fields
    explained = {0: True, 1: any(problems.values()), 2: any(err.values())}.get(done.returncode, False)
    outcomes = {}
    for kind, (cfg, _) in opened.items():
        if not explained:  # the JVM failed, not a file: each file's check fails as it would have alone
            outcomes[kind] = _outcome(cfg, kind, done.returncode, [], stderr)
        else:
            outcomes[kind] = _outcome(cfg, kind, 2 if err[kind] else 1 if problems[kind] else 0, out[kind],
                                      "\n".join(err[kind]))
    return outcomes


def _by_kind(text: str, kinds: Iterable[str]) -> dict[str, list[str]]:
    """`KIND<TAB>line` lines, the kind taken off, by kind; other lines (the JVM's own) left out."""
    lines: dict[str, list[str]] = {kind: [] for kind in kinds}
    for line in text.split("\n"):
        kind, tab, rest = line.partition("\t")
        if tab and kind in lines:
            lines[kind].append(rest)
    return lines


def _outcome(cfg: ClientConfig, kind: str, status: int, lines: list[str], stderr: str) -> Outcome:
    """A file's outcome from its check's status and lines: 0 clean (its JAAS lines), 1 its problems (the first
    raised), else it could not be checked (stderr says why)."""
    if status == 1 and lines:
        key, _, reason = lines[0].partition("\t")
        return cfg.error(key or None, redact(reason))
    if status != 0:
        return MirrordError(f"cannot check {cfg.path} with Kafka's Java {kind}: {redact(stderr.strip()[:300])}")
    return _jaas_login(lines)


def _unescape(text: str) -> str:
    """ClientConfigCheck's escapes undone: backslash, tab, newline, carriage return."""
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), text)


def _jaas_login(lines: list[str]) -> translate.JaasLogin | None:
    """`jaas<TAB>module<TAB>option<TAB>value` lines (ClientConfigCheck's) as a JaasLogin."""
    rows = [[_unescape(f) for f in line.split("\t")[1:]] for line in lines if line.startswith("jaas\t")]
    if not rows:
        return None
    return translate.JaasLogin(rows[0][0], {option: value for _, option, value in rows if option})


def offset_syncs_topic(settings: Settings) -> str:
    """MirrorMaker 2's name for offset syncs kept on the target cluster (offset-syncs.topic.location=target)."""
    return mm2_offset_syncs_topic(settings.source_alias, settings.separator)


@dataclass(frozen=True)
class Flow:
    """Everything the data path needs, derived once from Settings."""

    settings: Settings
    policy: Policy
    pattern: str
    source_options: translate.SourceOptions
    sink_options: dict[str, str]
    source_admin: dict[str, str]  # librdkafka settings of mirrord's admin clients
    target_admin: dict[str, str]

    __repr__ = dataclass_repr

    @property
    def name(self) -> str:
        """The flow's name (`flow`), the label of its metrics."""
        return self.settings.flow

    @property
    def target_properties(self) -> dict[str, str]:
        """The target's Java client properties, as producer.properties gave them with mirrord's defaults (the
        `kafka.` prefix left out): for the writer's producers and the JVM's other clients of the target."""
        return {k.removeprefix("kafka."): v for k, v in self.sink_options.items() if k.startswith("kafka.")}

    @property
    def offset_syncs_topic(self) -> str:
        return offset_syncs_topic(self.settings)

    def query_differs(self, other: Flow) -> bool:
        """Whether `other` defines another streaming query, so that a reload must restart it; the other
        settings (side jobs' intervals, groups, stall timeout) apply without touching the query."""
        def definition(flow: Flow) -> tuple:
            return (*(getattr(flow, f.name) for f in fields(flow) if f.name != "settings"),
                    flow.settings.batch_interval_ms, flow.settings.max_offsets_per_trigger, flow.settings.whitelist,
                    flow.settings.transforms)
        return definition(self) != definition(other)

    @classmethod
    def from_settings(cls, settings: Settings) -> Flow:
        policy = make_policy(settings.replication_policy, settings.source_alias, settings.target_alias,
                             settings.separator)
        sink, ignored = translate.sink_options(settings.producer)
        if settings.leader_election:  # the producer's timeouts inside the lease (docs/decisions.md §6)
            sink = bound_producer(sink, settings.producer, settings.leader_session_timeout_ms)
        source = translate.consumer_to_spark(settings.consumer)
        for cfg in (settings.producer, settings.consumer):  # librdkafka's judgement first: it needs no JVM
            translate.check_librdkafka(cfg, translate.admin_settings(cfg, translate.SHAPE_OF_A_LOGIN))
        java = check_java_clients((settings.producer, "producer"), (settings.consumer, "consumer"))  # one JVM
        target_admin = translate.admin_settings(settings.producer, java.login("producer"))  # producer first
        source_admin = translate.admin_settings(settings.consumer, java.login("consumer"))
        for key, why in {**source.ignored, **ignored}.items():
            log.warning("ignoring %s: %s", key, why)
        return cls(settings, policy, subscribe_pattern(settings.whitelist, policy, settings.topics_exclude,
                                                       settings.separator), source,
                   sink, source_admin, target_admin)
