"""A flow's definition: everything the data path needs, derived once from Settings.

The replication policy and the subscribe pattern, the Kafka source's and sink's options translated
from the two .properties files (each judged first by librdkafka, then by Kafka's own Java client, as
Spark would load it), and the librdkafka settings of mirrord's admin clients.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from dataclasses import dataclass, fields
from pathlib import Path

from mirrord import translate
from mirrord.config import ClientConfig, Settings
from mirrord.errors import MirrordError
from mirrord.policy import Policy, make_policy, subscribe_pattern
from mirrord.policy import offset_syncs_topic as mm2_offset_syncs_topic
from mirrord.redact import SECRET_KEY, dataclass_repr, redact
from mirrord.spark import connector_jars

log = logging.getLogger(__name__)


def check_java_client(cfg: ClientConfig, kind: str) -> translate.JaasLogin | None:
    """Let Kafka's own Java client judge a .properties file (`io.mirrord.ClientConfigCheck`), as it would
    at start inside Spark, where an unknown key is only a warning: a typo is a config error here. Returns
    its sasl.jaas.config as Kafka's own parser read it (None without one)."""
    import pyspark

    slf4j = sorted((Path(pyspark.__file__).parent / "jars").glob("slf4j-api-*.jar"))
    classpath = os.pathsep.join([*connector_jars(), *map(str, slf4j)])
    java = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME") else "java"
    try:
        with open(cfg.path, "rb") as properties:
            done = subprocess.run([java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath,
                                   f"-Dmirrord.secret.keys={SECRET_KEY.pattern}",
                                   "io.mirrord.ClientConfigCheck", kind], stdin=properties, capture_output=True,
                                  timeout=60, check=False, start_new_session=True)  # signals are mirrord's
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MirrordError(f"cannot check {cfg.path} with Kafka's Java {kind}: {exc}") from None
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    if done.returncode == 1:
        key, _, reason = lines[0].partition("\t")
        raise cfg.error(key or None, redact(reason))
    if done.returncode != 0:
        raise MirrordError(f"cannot check {cfg.path} with Kafka's Java {kind}: "
                           f"{redact(done.stderr.decode('utf-8', 'replace').strip()[:300])}")
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
        source = translate.consumer_to_spark(settings.consumer)
        for cfg in (settings.producer, settings.consumer):  # librdkafka's judgement first: it needs no JVM
            translate.check_librdkafka(cfg, translate.admin_settings(cfg, translate.SHAPE_OF_A_LOGIN))
        target_admin = translate.admin_settings(settings.producer, check_java_client(settings.producer, "producer"))
        source_admin = translate.admin_settings(settings.consumer, check_java_client(settings.consumer, "consumer"))
        for key, why in {**source.ignored, **ignored}.items():
            log.warning("ignoring %s: %s", key, why)
        sink.update({
            "kafka.mirrord.offset.syncs.topic": offset_syncs_topic(settings),
            "kafka.mirrord.offset.lag.max": str(settings.offset_lag_max),
            "kafka.mirrord.source.topic.prefix": policy.target_prefix,
        })
        return cls(settings, policy, subscribe_pattern(settings.whitelist, policy, settings.topics_exclude,
                                                       settings.separator), source,
                   sink, source_admin, target_admin)
