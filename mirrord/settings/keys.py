"""mirrord.conf's [mirrord] keys: each one's parser, default and meaning, and the parsers' values.

Every parser takes the raw text and the `Origin` it came from, and raises a ConfigError naming that
origin when the text is wrong; `config.load` decides which text wins.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mirrord.errors import ConfigError

# `trigger`: Spark's two trigger modes, or the one the task slots allow (mirrord/spark/modes.py)
AUTO = "auto"
REAL_TIME = "real-time"
MICRO_BATCH = "micro-batch"
CHOICES = (AUTO, REAL_TIME, MICRO_BATCH)

MIN_CHECKPOINT_INTERVAL_MS = 5000

# `delivery`: docs/decisions.md §12
AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"


@dataclass(frozen=True)
class Origin:
    """Where a value came from, for error messages: (file, key) or (variable) or (flag)."""

    file: str | None
    key: str

    def error(self, reason: str) -> ConfigError:
        return ConfigError(self.file, self.key, reason)


def _positive_int(text: str, origin: Origin) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise origin.error(f"must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise origin.error(f"must be a positive integer, got {text!r}")
    return value


def _optional_positive_int(text: str, origin: Origin) -> int | None:
    return None if text.strip() in ("", "none") else _positive_int(text, origin)


def _boolean(text: str, origin: Origin) -> bool:
    value = text.strip().lower()
    if value in ("true", "yes", "on", "1"):
        return True
    if value in ("false", "no", "off", "0"):
        return False
    raise origin.error(f"must be true or false, got {text!r}")


def _text(text: str, origin: Origin) -> str:
    if not text.strip():
        raise origin.error("must not be empty")
    return text.strip()


def _optional_text(text: str, origin: Origin) -> str:
    return text.strip()


def _listen(text: str, origin: Origin) -> tuple[str, int] | None:
    text = text.strip()
    if text in ("", "none", "off"):
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise origin.error(f"must be HOST:PORT (or empty to disable), got {text!r}")
    return (host.strip("[]") or "0.0.0.0", int(port))


def _policy(text: str, origin: Origin) -> str:
    value = text.strip().lower()
    if value not in ("identity", "prefix"):
        raise origin.error(f"must be 'identity' or 'prefix', got {text!r}")
    return value


def _trigger(text: str, origin: Origin) -> str:
    value = text.strip().lower()
    if value not in CHOICES:
        raise origin.error(f"must be {', '.join(CHOICES[:-1])} or {CHOICES[-1]}, got {text!r}")
    return value


def _delivery(text: str, origin: Origin) -> str:
    value = text.strip().lower()
    if value not in (AT_LEAST_ONCE, EXACTLY_ONCE):
        raise origin.error(f"must be {AT_LEAST_ONCE} or {EXACTLY_ONCE}, got {text!r}")
    return value


def _checkpoint_interval(text: str, origin: Origin) -> int:
    value = _positive_int(text, origin)
    if value < MIN_CHECKPOINT_INTERVAL_MS:
        raise origin.error(f"must be at least {MIN_CHECKPOINT_INTERVAL_MS} (Spark's real-time mode checkpoints "
                           f"at most every 5 seconds), got {text!r}")
    return value


FLOW_NAME_MAX = 150  # the flow's names on the target (mirrord/identity.py) stay within Kafka's 249 characters


def flow_name(text: str, origin: Origin) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text.strip()):
        raise origin.error(f"must be letters, digits, '.', '_' or '-', got {text!r}")
    if len(text.strip()) > FLOW_NAME_MAX:
        raise origin.error(f"must be at most {FLOW_NAME_MAX} characters, got {len(text.strip())}")
    return text.strip()


def normalize_whitelist(raw: str) -> str:
    """MirrorMaker 1's whitelist rules: surrounding quotes dropped, spaces removed, ',' means '|'.

    Commas inside a `{m,n}` quantifier are kept, unlike MirrorMaker 1 which broke such regexes.
    """
    text = raw.strip().strip("\"'").replace(" ", "")
    out, depth = [], 0
    for ch in text:
        depth += ch == "{"
        depth -= ch == "}" and depth > 0
        out.append("|" if ch == "," and depth == 0 else ch)
    return "".join(out)


def regex(text: str, origin: Origin) -> str:
    pattern = normalize_whitelist(text)
    if not pattern:
        raise origin.error("must not be empty")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise origin.error(f"invalid regular expression {pattern!r}: {exc}") from None
    return pattern


def optional_regex(text: str, origin: Origin) -> str:
    return regex(text, origin) if normalize_whitelist(text) else ""


@dataclass(frozen=True)
class Key:
    parse: Callable[[str, Origin], object]
    default: str | None
    doc: str


# Every [mirrord] key, its parser and its default, named once. `etc/mirrord.conf` documents them.
KEYS: dict[str, Key] = {
    "flow": Key(flow_name, "default", "name of this flow; state lives in <state.dir>/<flow>"),
    "consumer.config": Key(_text, "consumer.properties", "source cluster, Java consumer properties"),
    "producer.config": Key(_text, "producer.properties", "target cluster, Java producer properties"),
    "whitelist": Key(regex, None, "topics to mirror: a regex matched against the whole name"),
    "topics.exclude": Key(optional_regex, "", "topics never mirrored although the whitelist matches them: a regex "
                          "(MirrorMaker 2's name)"),
    "num.streams": Key(_optional_positive_int, "", "the source's streams, each a Spark task with one consumer "
                       "reading a group of partitions, as MirrorMaker 1's streams; empty: a stream per core (local "
                       "master) or per task slot of the cluster"),
    "trigger": Key(_trigger, "auto", "real-time (a long task per source partition, milliseconds per record), "
                   "micro-batch, or auto: real-time mode wherever the task slots allow"),
    "checkpoint.interval.ms": Key(_checkpoint_interval, "120000", "real-time mode: how long a batch runs, i.e. how "
                                  "often Spark checkpoints; each batch's end pauses every stream for a moment "
                                  "(docs/decisions.md §4)"),
    "offset.commit.interval.ms": Key(_positive_int, "250", "micro-batch mode: the batch interval; each batch ends "
                                     "in a commit"),
    "delivery": Key(_delivery, AT_LEAST_ONCE, "at-least-once (mirrord's writer without transactions; a restart "
                    "copies again what was in flight) or exactly-once (Kafka transactions on the target holding "
                    "the records and the source positions they reach; target consumers read with "
                    "isolation.level=read_committed)"),
    "transaction.interval.ms": Key(_positive_int, "100", "exactly-once: how often each stream commits its "
                                   "transaction, i.e. how long read_committed consumers of the target wait at most "
                                   "for a record beyond its copy while the stream keeps up (a backlog's slow commits "
                                   "stretch it up to 10x)"),
    "abort.on.send.failure": Key(_boolean, "true", "exit on a failed send (else retry the batch in-process)"),
    "state.dir": Key(_text, "/var/lib/mirrord", "checkpoint and state root"),
    "metrics.listen": Key(_listen, "", "Prometheus endpoint HOST:PORT; empty disables it"),
    "replication.policy": Key(_policy, "identity", "identity (MirrorMaker 1) or prefix (MirrorMaker 2)"),
    "source.alias": Key(flow_name, "source", "name of the source cluster (prefix policy, checkpoints, heartbeats); "
                        "required with the prefix policy"),
    "target.alias": Key(flow_name, "target", "name of the target cluster (cycle detection, heartbeats); required "
                        "with the prefix policy"),
    "replication.policy.separator": Key(_text, ".", "separator of the prefix policy"),
    "spark.master": Key(_optional_text, "", "Spark master URL; empty means local[N], N sized from the source "
                        "partitions (real-time mode) or num.streams (micro-batch mode)"),
    "max.offsets.per.trigger": Key(_optional_positive_int, "2000000", "records per micro-batch at most"),
    "sync.topic.configs.enabled": Key(_boolean, "true", "create target topics with the source topic's own "
                                      "configs (retention.ms, cleanup.policy, ...), as MirrorMaker 2"),
    "sync.topic.configs.interval.seconds": Key(_positive_int, "600", "how often target topics get the configs "
                                               "changed on their source topics"),
    "sync.group.offsets.enabled": Key(_boolean, "false", "commit translated offsets of source consumer groups "
                                      "into the same groups on the target, for failover (MirrorMaker 2)"),
    "sync.group.offsets.interval.seconds": Key(_positive_int, "60", "how often group offsets are translated"),
    "groups": Key(regex, ".*", "consumer groups whose offsets are translated: a regex"),
    "groups.exclude": Key(optional_regex, "console-consumer-.*,connect-.*,__.*", "groups never translated"),
    "offset.syncs.retire.enabled": Key(_boolean, "true", "tombstone the offset-sync keys of writers gone 10 minutes, "
                                       "their syncs kept under this host's key, so the topic does not grow for ever "
                                       "(false: no tombstones, for a MirrorMaker 2 checkpoint connector reading it)"),
    "offset.lag.max": Key(_positive_int, "100", "an offset sync at least every this many records of a partition "
                          "(and at every gap), as MirrorMaker 2's offset.lag.max"),
    "leader.election.enabled": Key(_boolean, "true", "several hosts may run this flow: one mirrors, elected by a "
                                   "consumer group on the target, the others stand by"),
    "leader.session.timeout.ms": Key(_positive_int, "10000", "how long an active host may be silent before a "
                                     "standby takes over (the election group's session.timeout.ms)"),
    "emit.checkpoints.enabled": Key(_boolean, "true", "write the translated offsets of source consumer groups "
                                    "to <source.alias>.checkpoints.internal on the target, as MirrorMaker 2"),
    "emit.checkpoints.interval.seconds": Key(_positive_int, "60", "how often checkpoints are written"),
    "emit.heartbeats.enabled": Key(_boolean, "true", "write MirrorMaker 2 heartbeats to the `heartbeats` topics "
                                   "of both clusters (end-to-end liveness, cycle detection)"),
    "emit.heartbeats.interval.seconds": Key(_positive_int, "1", "how often heartbeats are written"),
    "sync.topic.acls.enabled": Key(_boolean, "false", "copy the source's topic ACLs (READ, DESCRIBE, ...) to the "
                                   "target topics, as MirrorMaker 2's sync.topic.acls.enabled"),
    "sync.topic.acls.interval.seconds": Key(_positive_int, "600", "how often topic ACLs are copied"),
    "stall.timeout.ms": Key(_positive_int, "120000", "a batch running longer than this stops the watchdog"),
}
REQUIRED = {"whitelist"}
ALIAS_KEYS = ("source.alias", "target.alias")


def check_aliases(policy: str, given: Mapping[str, Origin], aliases: Mapping[str, str],
                  where: str | os.PathLike) -> None:
    """With the prefix policy, the aliases name the clusters in topic names and decide what is never
    mirrored back: two flows of an active/active pair left at the defaults `source`/`target` would
    each mirror the other's copies forever (`source.source.source...`). So both must be set, and differ."""
    if policy != "prefix":
        return
    for key in ALIAS_KEYS:
        if key not in given:
            raise ConfigError(where, key, "must be set with replication.policy=prefix (the name of that cluster, "
                              "the same in every flow that reads or writes it)")
    if aliases["source.alias"] == aliases["target.alias"]:
        raise given["target.alias"].error(f"must differ from source.alias ({aliases['source.alias']!r}): "
                                          "with the prefix policy equal aliases make a cycle")
