"""Settings: mirrord.conf (INI), the two .properties files, the environment and the command line.

Everything is read and validated once, here, into a frozen `Settings`; the rest of mirrord never
reads a file or the environment. Precedence, lowest first: defaults, mirrord.conf, environment
(`MIRRORD_<KEY>`, as MirrorMaker 1's units set MM_WHITELIST in /etc/default), command-line flags.
Every error names where the value came from (file and key, variable, or flag) and what is wrong.
"""

from __future__ import annotations

import configparser
import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import javaproperties

from mirrord.errors import ConfigError
from mirrord.settings import transforms
from mirrord.settings.redact import dataclass_repr, remember_secrets
from mirrord.settings.transforms import Transform
from mirrord.spark import modes

DEFAULT_CONFIG = Path("/etc/mirrord/mirrord.conf")
SECTION = "mirrord"
SPARK_SECTION = "spark"
ENV_PREFIX = "MIRRORD_"
MIN_CHECKPOINT_INTERVAL_MS = 5000


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
    if value not in modes.CHOICES:
        raise origin.error(f"must be {', '.join(modes.CHOICES[:-1])} or {modes.CHOICES[-1]}, got {text!r}")
    return value


def _checkpoint_interval(text: str, origin: Origin) -> int:
    value = _positive_int(text, origin)
    if value < MIN_CHECKPOINT_INTERVAL_MS:
        raise origin.error(f"must be at least {MIN_CHECKPOINT_INTERVAL_MS} (Spark's real-time mode checkpoints "
                           f"at most every 5 seconds), got {text!r}")
    return value


def _flow(text: str, origin: Origin) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text.strip()):
        raise origin.error(f"must be letters, digits, '.', '_' or '-', got {text!r}")
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


def _whitelist(text: str, origin: Origin) -> str:
    pattern = normalize_whitelist(text)
    if not pattern:
        raise origin.error("must not be empty")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise origin.error(f"invalid regular expression {pattern!r}: {exc}") from None
    return pattern


def _optional_regex(text: str, origin: Origin) -> str:
    return _whitelist(text, origin) if normalize_whitelist(text) else ""


@dataclass(frozen=True)
class Key:
    parse: Callable[[str, Origin], object]
    default: str | None
    doc: str


# Every [mirrord] key, its parser and its default, named once. `etc/mirrord.conf` documents them.
KEYS: dict[str, Key] = {
    "flow": Key(_flow, "default", "name of this flow; state lives in <state.dir>/<flow>"),
    "consumer.config": Key(_text, "consumer.properties", "source cluster, Java consumer properties"),
    "producer.config": Key(_text, "producer.properties", "target cluster, Java producer properties"),
    "whitelist": Key(_whitelist, None, "topics to mirror: a regex matched against the whole name"),
    "topics.exclude": Key(_optional_regex, "", "topics never mirrored although the whitelist matches them: a regex "
                          "(MirrorMaker 2's name)"),
    "num.streams": Key(_optional_positive_int, "", "the source's streams, each a Spark task with one consumer "
                       "reading a group of partitions, as MirrorMaker 1's streams; empty: a stream per core (local "
                       "master) or per task slot of the cluster"),
    "trigger": Key(_trigger, "auto", "real-time (a long task per source partition, milliseconds per record), "
                   "micro-batch, or auto: real-time mode wherever the task slots allow"),
    "checkpoint.interval.ms": Key(_checkpoint_interval, "30000", "real-time mode: how long a batch runs, i.e. how "
                                  "often Spark checkpoints; new topics and partitions start at a batch's start"),
    "offset.commit.interval.ms": Key(_positive_int, "250", "micro-batch mode: the batch interval; each batch ends "
                                     "in a commit"),
    "abort.on.send.failure": Key(_boolean, "true", "exit on a failed send (else retry the batch in-process)"),
    "state.dir": Key(_text, "/var/lib/mirrord", "checkpoint and state root"),
    "metrics.listen": Key(_listen, "", "Prometheus endpoint HOST:PORT; empty disables it"),
    "replication.policy": Key(_policy, "identity", "identity (MirrorMaker 1) or prefix (MirrorMaker 2)"),
    "source.alias": Key(_flow, "source", "name of the source cluster (prefix policy, checkpoints, heartbeats); "
                        "required with the prefix policy"),
    "target.alias": Key(_flow, "target", "name of the target cluster (cycle detection, heartbeats); required "
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
    "groups": Key(_whitelist, ".*", "consumer groups whose offsets are translated: a regex"),
    "groups.exclude": Key(_optional_regex, "console-consumer-.*,connect-.*,__.*", "groups never translated"),
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


@dataclass(frozen=True)
class ClientConfig:
    """One .properties file: where it is and what it says."""

    path: Path
    properties: Mapping[str, str]

    __repr__ = dataclass_repr

    def error(self, key: str | None, reason: str) -> ConfigError:
        return ConfigError(self.path, key, reason)


@dataclass(frozen=True)
class Settings:
    flow: str
    consumer: ClientConfig
    producer: ClientConfig
    whitelist: str
    num_streams: int | None  # None: a stream per core or task slot (modes.default_streams)
    batch_interval_ms: int
    abort_on_send_failure: bool
    state_root: Path
    metrics_listen: tuple[str, int] | None
    replication_policy: str
    source_alias: str
    target_alias: str
    separator: str
    spark_master: str
    max_offsets_per_trigger: int | None
    stall_timeout_ms: int
    trigger: str = modes.AUTO
    checkpoint_interval_ms: int = 30000
    sync_topic_configs: bool = True
    sync_topic_configs_interval: float = 600.0
    sync_group_offsets: bool = False
    sync_group_offsets_interval: float = 60.0
    groups: str = ".*"
    groups_exclude: str = ""
    offset_lag_max: int = 100
    leader_election: bool = True
    leader_session_timeout_ms: int = 10000
    emit_checkpoints: bool = True
    emit_checkpoints_interval: float = 60.0
    emit_heartbeats: bool = True
    emit_heartbeats_interval: float = 1.0
    sync_topic_acls: bool = False
    sync_topic_acls_interval: float = 600.0
    topics_exclude: str = ""
    transforms: tuple[Transform, ...] = ()
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    config_file: Path | None = None

    __repr__ = dataclass_repr

    @property
    def state_dir(self) -> Path:
        return self.state_root / self.flow

    @property
    def checkpoint_dir(self) -> Path:
        return self.state_dir / "checkpoint"

    @property
    def group_id(self) -> str:
        return self.consumer.properties.get("group.id") or f"mirrord-{self.flow}"


def _open(path: Path, mode: str = "r"):
    """open() with the reasons a file cannot be read turned into ConfigErrors naming it."""
    try:
        return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))
    except FileNotFoundError:
        raise ConfigError(path, None, "file not found") from None
    except PermissionError:
        raise ConfigError(path, None, "permission denied") from None
    except IsADirectoryError:
        raise ConfigError(path, None, "is a directory, not a file") from None


def read_properties(path: Path) -> ClientConfig:
    try:
        with _open(path, "rb") as fp:  # ISO-8859-1 with \uXXXX escapes, as java.util.Properties reads it
            props = javaproperties.load(fp)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(path, None, f"not a readable Java properties file: {exc}") from None
    props = {k.strip(): v.strip() for k, v in props.items()}
    remember_secrets(props)
    if not props.get("bootstrap.servers"):
        raise ConfigError(path, "bootstrap.servers", "required, and missing or empty")
    return ClientConfig(path=path, properties=props)


def _read_ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=configparser.ExtendedInterpolation(), strict=True)
    parser.optionxform = str  # keys are case-sensitive, dotted, as Kafka's
    try:
        with _open(path) as fp:
            parser.read_file(fp)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(path, None, f"not a readable text file: {exc}") from None
    except configparser.Error as exc:
        raise _ini_error(path, exc) from None
    unknown_sections = {s for s in parser.sections() if not s.startswith(transforms.SECTION_PREFIX)} - {
        SECTION, SPARK_SECTION}
    if unknown_sections:
        name = sorted(unknown_sections)[0]
        raise ConfigError(path, f"[{name}]", f"unknown section (expected [{SECTION}], [{SPARK_SECTION}] and "
                                             f"[{transforms.SECTION_PREFIX}NAME])")
    return parser


def _ini_error(path: Path, exc: configparser.Error) -> ConfigError:
    """configparser's multi-line messages as one line naming the line (never its text: it may hold a secret)."""
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return ConfigError(path, None, f"line {exc.lineno}: a setting before any [{SECTION}] section header")
    if isinstance(exc, configparser.DuplicateSectionError):
        return ConfigError(path, f"[{exc.section}]", f"line {exc.lineno}: the section appears twice")
    if isinstance(exc, configparser.DuplicateOptionError):
        return ConfigError(path, exc.option, f"line {exc.lineno}: set twice in [{exc.section}]")
    if isinstance(exc, configparser.ParsingError):
        return ConfigError(path, None, f"line {exc.errors[0][0]}: not a 'key = value' line")
    return ConfigError(path, None, f"not a valid INI file: {exc.message.splitlines()[0]}")


def _unknown(key: str, known) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _section(parser: configparser.ConfigParser, name: str, path: Path, is_setting, raw: bool = False) -> dict[str, str]:
    """A section's settings; [DEFAULT] keys that are not settings are variables for ${...} (unless raw)."""
    if not parser.has_section(name):
        return {}
    try:
        shared = parser.defaults()
        return {k: v for k, v in parser.items(name, raw=raw) if k not in shared or is_setting(k)}
    except configparser.InterpolationError as exc:
        raise ConfigError(path, getattr(exc, "option", None), f"bad ${{...}} reference: {exc.message}") from None


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
# Every key of a [transform:NAME] section; `etc/mirrord.conf` documents them.
TRANSFORM_KEYS = ("topics", "filter", "sample", "key", "value", "drop.headers")


def _transform(name: str, values: Mapping[str, str], path: Path) -> Transform:
    """One [transform:NAME] section; its expressions are checked by Spark later (pipeline.check_transforms)."""
    section = f"[{transforms.SECTION_PREFIX}{name}]"
    _flow(name, Origin(str(path), section))
    for key in values:
        if key not in TRANSFORM_KEYS:
            raise ConfigError(path, f"{section} {key}", f"unknown setting (expected {', '.join(TRANSFORM_KEYS)})")
    if not values.get("topics", "").strip():
        raise ConfigError(path, f"{section} topics", "required: a regex of the source topics it applies to")
    origin = lambda key: Origin(str(path), f"{section} {key}")  # noqa: E731
    text = {k: values.get(k, "").strip() for k in TRANSFORM_KEYS}
    if not any(text[k] for k in TRANSFORM_KEYS if k != "topics"):
        raise ConfigError(path, section, "does nothing: set filter, sample, key, value or drop.headers")
    sample = 1.0
    if text["sample"]:
        try:
            sample = transforms.parse_sample(text["sample"])
        except ValueError as exc:
            raise origin("sample").error(str(exc)) from None
    return Transform(name=name, topics=_whitelist(text["topics"], origin("topics")), filter=text["filter"],
                     sample=sample, key=text["key"], value=text["value"],
                     drop_headers=_optional_regex(text["drop.headers"], origin("drop.headers")))


def _transforms(parser: configparser.ConfigParser, path: Path) -> tuple[Transform, ...]:
    """Taken as written, without ${...} interpolation: JSON paths in Spark SQL start with `$`."""
    return tuple(_transform(section.removeprefix(transforms.SECTION_PREFIX),
                            _section(parser, section, path, TRANSFORM_KEYS.__contains__, raw=True), path)
                 for section in parser.sections() if section.startswith(transforms.SECTION_PREFIX))


def load(
    config_file: Path | None = None,
    flags: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Build Settings from the INI file (optional), the environment and flags (key → raw text)."""
    flags = dict(flags or {})
    environ = os.environ if environ is None else environ
    raw: dict[str, tuple[str, Origin]] = {}
    spark_conf: dict[str, str] = {}
    transform_sections: tuple[Transform, ...] = ()
    base = Path.cwd()
    if config_file is not None:
        parser = _read_ini(config_file)
        base = config_file.parent
        for key, value in _section(parser, SECTION, config_file, KEYS.__contains__).items():
            if key not in KEYS:
                raise ConfigError(config_file, key, f"unknown setting in [{SECTION}]{_unknown(key, KEYS)}")
            raw[key] = (value, Origin(str(config_file), key))
        spark_conf = _section(parser, SPARK_SECTION, config_file, lambda k: k.startswith("spark."))
        remember_secrets(spark_conf)
        for key in spark_conf:
            if not key.startswith("spark."):
                raise ConfigError(config_file, key, f"[{SPARK_SECTION}] takes Spark settings (spark.*) only")
        transform_sections = _transforms(parser, config_file)
    for key in KEYS:
        var = ENV_PREFIX + key.upper().replace(".", "_")
        if environ.get(var, "").strip():
            raw[key] = (environ[var], Origin("environment", var))
    for key, value in flags.items():
        raw[key] = (value, Origin("command line", f"--{key}"))

    values: dict[str, object] = {}
    for key, spec in KEYS.items():
        if key in raw:
            text, origin = raw[key]
        elif key in REQUIRED:
            where = config_file or "command line"
            raise ConfigError(where, key, "required (set it in mirrord.conf, MIRRORD_WHITELIST or --whitelist)")
        else:
            text, origin = spec.default or "", Origin(None, key)
        values[key] = spec.parse(text, origin)
    check_aliases(str(values["replication.policy"]), {k: raw[k][1] for k in ALIAS_KEYS if k in raw},
                  {k: str(values[k]) for k in ALIAS_KEYS}, config_file or "command line")

    def client(key: str) -> ClientConfig:
        path = Path(str(values[key]))
        return read_properties(path if path.is_absolute() else base / path)

    num_streams = values["num.streams"]
    settings = Settings(
        flow=str(values["flow"]),
        consumer=client("consumer.config"),
        producer=client("producer.config"),
        whitelist=str(values["whitelist"]),
        num_streams=num_streams,  # type: ignore[arg-type]
        batch_interval_ms=int(values["offset.commit.interval.ms"]),  # type: ignore[arg-type]
        abort_on_send_failure=bool(values["abort.on.send.failure"]),
        state_root=(base / str(values["state.dir"])).absolute(),
        metrics_listen=values["metrics.listen"],  # type: ignore[arg-type]
        replication_policy=str(values["replication.policy"]),
        source_alias=str(values["source.alias"]),
        target_alias=str(values["target.alias"]),
        separator=str(values["replication.policy.separator"]),
        spark_master=str(values["spark.master"]),
        max_offsets_per_trigger=values["max.offsets.per.trigger"],  # type: ignore[arg-type]
        stall_timeout_ms=int(values["stall.timeout.ms"]),  # type: ignore[arg-type]
        trigger=str(values["trigger"]),
        checkpoint_interval_ms=int(values["checkpoint.interval.ms"]),  # type: ignore[arg-type]
        sync_topic_configs=bool(values["sync.topic.configs.enabled"]),
        sync_topic_configs_interval=float(values["sync.topic.configs.interval.seconds"]),  # type: ignore[arg-type]
        sync_group_offsets=bool(values["sync.group.offsets.enabled"]),
        sync_group_offsets_interval=float(values["sync.group.offsets.interval.seconds"]),  # type: ignore[arg-type]
        groups=str(values["groups"]),
        groups_exclude=str(values["groups.exclude"]),
        offset_lag_max=int(values["offset.lag.max"]),  # type: ignore[arg-type]
        leader_election=bool(values["leader.election.enabled"]),
        leader_session_timeout_ms=int(values["leader.session.timeout.ms"]),  # type: ignore[arg-type]
        emit_checkpoints=bool(values["emit.checkpoints.enabled"]),
        emit_checkpoints_interval=float(values["emit.checkpoints.interval.seconds"]),  # type: ignore[arg-type]
        emit_heartbeats=bool(values["emit.heartbeats.enabled"]),
        emit_heartbeats_interval=float(values["emit.heartbeats.interval.seconds"]),  # type: ignore[arg-type]
        sync_topic_acls=bool(values["sync.topic.acls.enabled"]),
        sync_topic_acls_interval=float(values["sync.topic.acls.interval.seconds"]),  # type: ignore[arg-type]
        topics_exclude=str(values["topics.exclude"]),
        transforms=transform_sections,
        spark_conf=spark_conf,
        config_file=config_file,
    )

    def origin(key: str) -> Origin:
        return raw[key][1] if key in raw else Origin(str(config_file) if config_file else None, key)
    _check_together(settings, origin)
    return settings


def _servers(cfg: ClientConfig) -> set[str]:
    return {s.strip().lower() for s in cfg.properties.get("bootstrap.servers", "").split(",") if s.strip()}


def _check_together(s: Settings, origin: Callable[[str], Origin]) -> None:
    """Settings valid one by one, but not together."""
    if s.replication_policy == "prefix" and s.source_alias == s.target_alias:
        raise origin("target.alias").error(f"must differ from source.alias ({s.source_alias!r}) with "
                                           "replication.policy=prefix, or copies cannot be told from sources")
    if s.replication_policy == "identity" and _servers(s.consumer) & _servers(s.producer):
        raise s.producer.error("bootstrap.servers", f"the source cluster's too ({s.consumer.path}): with "
                               "replication.policy=identity every record would be copied onto itself")

def fixed_changes(running: Settings, new: Settings) -> list[str]:
    """The settings a reload wants to change that cannot change while mirrord runs: the flow's identity
    and state (a new checkpoint or group would copy everything again), its clusters, the replication
    policy (other target topics) and Spark's own settings (a new JVM)."""
    def where(cfg: ClientConfig, key: str) -> str:
        return f"{key} ({cfg.path.name})"

    checks = [
        ("flow", running.flow, new.flow),
        ("state.dir", running.state_root, new.state_root),
        (where(new.consumer, "group.id"), running.group_id, new.group_id),
        (where(new.consumer, "bootstrap.servers"), running.consumer.properties.get("bootstrap.servers"),
         new.consumer.properties.get("bootstrap.servers")),
        (where(new.producer, "bootstrap.servers"), running.producer.properties.get("bootstrap.servers"),
         new.producer.properties.get("bootstrap.servers")),
        ("replication.policy", running.replication_policy, new.replication_policy),
        ("leader.election.enabled", running.leader_election, new.leader_election),
        ("leader.session.timeout.ms", running.leader_session_timeout_ms, new.leader_session_timeout_ms),
        ("source.alias", running.source_alias, new.source_alias),
        ("target.alias", running.target_alias, new.target_alias),
        ("replication.policy.separator", running.separator, new.separator),
        ("spark.master", running.spark_master, new.spark_master),
        ("num.streams", running.num_streams if not running.spark_master else 0,  # sizes mirrord's local[N]
         new.num_streams if not new.spark_master else 0),
        (f"[{SPARK_SECTION}]", dict(running.spark_conf), dict(new.spark_conf)),
    ]
    return [name for name, before, after in checks if before != after]
