"""Heartbeats: MirrorMaker 2's MirrorHeartbeatConnector, and the liveness of the flow end to end.

Every `emit.heartbeats.interval.seconds` a flow S→T writes, in MirrorMaker 2's Heartbeat format:

- (S, T, now) to `heartbeats` on the target: this flow's heartbeat, as MirrorMaker 2 writes it;
- (T, S, now) to `heartbeats` on the source, as MirrorMaker 2's dedicated mode does for the pair it
  does not replicate. The data path mirrors the source's `heartbeats` like any topic (always, as
  MirrorMaker 2 does), so it arrives in the target as `S.heartbeats` (prefix policy) or `heartbeats`
  (identity): the newest one there dates the last record that went all the way through Spark, also
  when no data flows (`mirrord_heartbeat_age_seconds`).

The identity policy cannot tell a copy from an original, so A→B plus B→A loops. What can be seen is
reported loudly: this flow's own heartbeat (S, T), written only to the target, found on the source
means a reverse flow copies the target back into the source (`mirrord_cycle_detected`).
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import Producer

from mirrord.errors import MirrordError
from mirrord.kafka.admin import Cluster, TopicReader, ensure_internal_topic
from mirrord.metrics import Metrics
from mirrord.settings.policy import Policy

log = logging.getLogger(__name__)
TOPIC = "heartbeats"
VERSION = 0


@dataclass(frozen=True)
class Heartbeat:
    source_alias: str
    target_alias: str
    timestamp: int  # ms since the epoch


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def encode(beat: Heartbeat) -> tuple[bytes, bytes]:
    """MirrorMaker 2's Heartbeat serialization: key = source alias, target alias (int16 length + UTF-8
    each); value = version (int16), timestamp (int64), big-endian."""
    return _string(beat.source_alias) + _string(beat.target_alias), struct.pack(">hq", VERSION, beat.timestamp)


def decode(key: bytes, value: bytes) -> Heartbeat:
    (n,) = struct.unpack_from(">h", key, 0)
    source = key[2:2 + n].decode("utf-8")
    (m,) = struct.unpack_from(">h", key, 2 + n)
    target = key[4 + n:4 + n + m].decode("utf-8")
    if len(key) != 4 + n + m:
        raise struct.error(f"heartbeat key of {len(key)} bytes, expected {4 + n + m}")
    _version, timestamp = struct.unpack_from(">hq", value, 0)
    return Heartbeat(source, target, timestamp)


def newest_through_the_flow(beats: Iterable[Heartbeat], source_alias: str) -> int | None:
    """The newest timestamp of the heartbeats written into the source cluster (target alias = the source),
    among those found in the target's copy of the source's `heartbeats`."""
    return max((b.timestamp for b in beats if b.target_alias == source_alias), default=None)


def loops_back(beats: Iterable[Heartbeat], source_alias: str, target_alias: str) -> bool:
    """This flow's own heartbeat, written only to the target, is on the source: something copies it back."""
    return any((b.source_alias, b.target_alias) == (source_alias, target_alias) for b in beats)


class _Reader(TopicReader):
    what = "heartbeat"

    def decode(self, msg) -> Heartbeat:
        return decode(msg.key(), msg.value())


class Heartbeats:
    """The heartbeats job: clients are (re)made when the daemon's clusters change (reload)."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics
        self._clusters: tuple[Cluster, Cluster] | None = None
        self._producers: dict[str, Producer] = {}
        self._readers: dict[str, _Reader] = {}
        self._newest: int | None = None
        self._looped = False

    def _connect(self, source: Cluster, target: Cluster) -> None:
        if self._clusters == (source, target):
            return
        for cluster in (source, target):
            ensure_internal_topic(cluster, TOPIC, "heartbeats")
        self.close()
        self._clusters = (source, target)
        self._producers = {c.name: Producer({**c.settings, "acks": "all", "linger.ms": 0}) for c in (source, target)}

    def run(self, source: Cluster, target: Cluster, source_alias: str, target_alias: str, policy: Policy) -> int:
        self._connect(source, target)
        now = int(time.time() * 1000)
        self._send(target, Heartbeat(source_alias, target_alias, now))
        self._send(source, Heartbeat(target_alias, source_alias, now))
        arrived: list[Heartbeat] = []
        if self._read(target, policy.target_topic(TOPIC), arrived.append):
            newest = newest_through_the_flow(arrived, source_alias)
            self._newest = max(self._newest or 0, newest or 0) or None
        if self._newest is not None:
            self.metrics.heartbeat_age.labels(self.metrics.flow).set(max(0.0, time.time() - self._newest / 1000))
        if policy.target_prefix == "":
            on_source: list[Heartbeat] = []
            self._read(source, TOPIC, on_source.append)
            if loops_back(on_source, source_alias, target_alias) and not self._looped:
                self._looped = True
                self.metrics.cycle.labels(self.metrics.flow).set(1)
                log.error("replication cycle: this flow's heartbeats (%s -> %s) came back to the source cluster, so a "
                          "flow copies %s back into %s with the identity policy and every record loops forever. Stop "
                          "one direction, or use replication.policy=prefix on both", source_alias, target_alias,
                          target_alias, source_alias)
        return 0

    def _send(self, cluster: Cluster, beat: Heartbeat) -> None:
        errors: list[str] = []
        key, value = encode(beat)
        producer = self._producers[cluster.name]
        producer.produce(TOPIC, key=key, value=value, partition=0, timestamp=beat.timestamp,
                         on_delivery=lambda err, _msg: err and errors.append(err.str()))
        if producer.flush(10) or errors:
            raise MirrordError(f"cannot write a heartbeat to the {cluster.name} cluster: "
                               f"{errors[0] if errors else 'timed out'}")

    def _read(self, cluster: Cluster, topic: str, add) -> bool:
        """Heartbeats written to `topic` since the last call; False while the topic does not exist."""
        key = f"{cluster.name}:{topic}"
        if key not in self._readers:
            if topic not in cluster.partitions():
                return False
            self._readers[key] = _Reader(cluster, topic)
        self._readers[key].read_to_end(add)
        return True

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
        for producer in self._producers.values():
            producer.flush(5)
        self._producers.clear()
