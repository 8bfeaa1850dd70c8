"""Settings: mirrord.conf (INI), the two .properties files, the environment and the command line.

Everything is read and validated once, here, into a frozen `Settings`; the rest of mirrord never
reads a file or the environment. Precedence, lowest first: defaults, mirrord.conf, environment
(`MIRRORD_<KEY>`, as MirrorMaker 1's units set MM_WHITELIST in /etc/default), command-line flags.
Every error names where the value came from (file and key, variable, or flag) and what is wrong.
Each key's parser and default are in keys.py, the reading of the files in files.py; this module puts
them together (`load`) and is where the rest of mirrord imports them from.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mirrord.errors import ConfigError
from mirrord.settings.files import (
    DEFAULT_CONFIG,
    SECTION,
    SPARK_SECTION,
    ClientConfig,
    read_ini,
    read_properties,
    read_transforms,
    section_settings,
)
from mirrord.settings.keys import (
    ALIAS_KEYS,
    AT_LEAST_ONCE,
    AUTO,
    EXACTLY_ONCE,
    KEYS,
    REQUIRED,
    Origin,
    check_aliases,
    normalize_whitelist,
)
from mirrord.settings.redact import dataclass_repr, remember_secrets
from mirrord.settings.transforms import Transform

ENV_PREFIX = "MIRRORD_"

# The settings' whole interface: the keys (keys.py) and the files (files.py) are read through here.
__all__ = ["DEFAULT_CONFIG", "ENV_PREFIX", "KEYS", "ClientConfig", "Origin", "Settings", "fixed_changes", "load",
           "normalize_whitelist", "read_properties"]


@dataclass(frozen=True)
class Settings:
    flow: str
    consumer: ClientConfig
    producer: ClientConfig
    whitelist: str
    num_streams: int | None  # None: a stream per core or task slot (mirrord/spark/modes.py: default_streams)
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
    trigger: str = AUTO
    delivery: str = AT_LEAST_ONCE
    transaction_interval_ms: int = 100
    checkpoint_interval_ms: int = 120000
    sync_topic_configs: bool = True
    sync_topic_configs_interval: float = 600.0
    sync_group_offsets: bool = False
    sync_group_offsets_interval: float = 60.0
    groups: str = ".*"
    groups_exclude: str = ""
    offset_lag_max: int = 100
    retire_offset_syncs: bool = True
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


def _unknown(key: str, known) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


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
        parser = read_ini(config_file)
        base = config_file.parent
        for key, value in section_settings(parser, SECTION, config_file, KEYS.__contains__).items():
            if key not in KEYS:
                raise ConfigError(config_file, key, f"unknown setting in [{SECTION}]{_unknown(key, KEYS)}")
            raw[key] = (value, Origin(str(config_file), key))
        spark_conf = section_settings(parser, SPARK_SECTION, config_file, lambda k: k.startswith("spark."))
        remember_secrets(spark_conf)
        for key in spark_conf:
            if not key.startswith("spark."):
                raise ConfigError(config_file, key, f"[{SPARK_SECTION}] takes Spark settings (spark.*) only")
        transform_sections = read_transforms(parser, config_file)
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
        delivery=str(values["delivery"]),
        transaction_interval_ms=int(values["transaction.interval.ms"]),  # type: ignore[arg-type]
        checkpoint_interval_ms=int(values["checkpoint.interval.ms"]),  # type: ignore[arg-type]
        sync_topic_configs=bool(values["sync.topic.configs.enabled"]),
        sync_topic_configs_interval=float(values["sync.topic.configs.interval.seconds"]),  # type: ignore[arg-type]
        sync_group_offsets=bool(values["sync.group.offsets.enabled"]),
        sync_group_offsets_interval=float(values["sync.group.offsets.interval.seconds"]),  # type: ignore[arg-type]
        groups=str(values["groups"]),
        groups_exclude=str(values["groups.exclude"]),
        offset_lag_max=int(values["offset.lag.max"]),  # type: ignore[arg-type]
        retire_offset_syncs=bool(values["offset.syncs.retire.enabled"]),
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
    isolation = s.consumer.properties.get("isolation.level", "read_committed").strip()
    if s.delivery == EXACTLY_ONCE and isolation != "read_committed":
        raise s.consumer.error("isolation.level", f"must be read_committed with delivery = {EXACTLY_ONCE} (aborted "
                               f"transactions of the source would be copied), got {isolation!r}")


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
        ("delivery", running.delivery, new.delivery),
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
