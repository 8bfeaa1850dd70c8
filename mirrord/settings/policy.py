"""Replication policies: what a source topic is called in the target, and what must not be mirrored.

As MirrorMaker 2's ReplicationPolicy: `identity` keeps the name (MirrorMaker 1's behaviour, no
cycle detection); `prefix` names the copy `<source alias><separator><topic>` and refuses a topic
that is already a copy from the target cluster, so active/active pairs never loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def is_internal(topic: str, separator: str = ".") -> bool:
    """Kafka's own topics (`__consumer_offsets`, ...) and MirrorMaker 2's internal topics: `*.internal`, and
    `*<separator>internal` as DefaultReplicationPolicy names them with its separator."""
    return topic.startswith("__") or topic.endswith(".internal") or topic.endswith(f"{separator}internal")


def offset_syncs_topic(source_alias: str, separator: str = ".") -> str:
    """MirrorMaker 2's DefaultReplicationPolicy.offsetSyncsTopic (internal topic separator enabled, its default)."""
    return f"mm2-offset-syncs{separator}{source_alias}{separator}internal"


def checkpoints_topic(source_alias: str, separator: str = ".") -> str:
    """MirrorMaker 2's DefaultReplicationPolicy.checkpointsTopic, which RemoteClusterUtils reads."""
    return f"{source_alias}{separator}checkpoints{separator}internal"


@dataclass(frozen=True)
class IdentityPolicy:
    target_prefix = ""

    def target_topic(self, source_topic: str) -> str:
        return source_topic

    def is_cycle(self, source_topic: str) -> bool:
        return False

    def exclusion_regex(self) -> str:
        return ""

    def heartbeats_regex(self) -> str:
        return "heartbeats"


@dataclass(frozen=True)
class PrefixPolicy:
    source_alias: str
    target_alias: str
    separator: str = "."

    @property
    def target_prefix(self) -> str:
        return f"{self.source_alias}{self.separator}"

    def target_topic(self, source_topic: str) -> str:
        return f"{self.target_prefix}{source_topic}"

    def is_cycle(self, source_topic: str) -> bool:
        """True when any upstream cluster in the name's prefix chain is the target (MM2's isCycle)."""
        *upstream, _ = source_topic.split(self.separator)
        return self.target_alias in upstream

    def exclusion_regex(self) -> str:
        sep = re.escape(self.separator)
        return f"(?!(?:.*{sep})?{re.escape(self.target_alias)}{sep})"

    def heartbeats_regex(self) -> str:
        """`heartbeats` and its remote copies (`A.heartbeats`, `B.A.heartbeats`), MirrorMaker 2's isHeartbeatsTopic."""
        return f"(?:.*{re.escape(self.separator)})?heartbeats"


Policy = IdentityPolicy | PrefixPolicy


def make_policy(name: str, source_alias: str, target_alias: str, separator: str) -> Policy:
    if name == "prefix":
        return PrefixPolicy(source_alias, target_alias, separator)
    return IdentityPolicy()


def subscribe_pattern(whitelist: str, policy: Policy, exclude: str = "", separator: str = ".") -> str:
    """One regex, valid in Java and Python, for Spark's `subscribePattern` and for our own listing.

    Internal topics, cycles and `topics.exclude` (a whole-name regex, applied after the whitelist as
    in MirrorMaker 2) are excluded by lookaheads, so the Kafka source never reads them. Anchored:
    Spark's source keeps the topics the pattern is *found* in (Scala's findFirstIn), so without `^...$`
    `prd-a` would also take `xprd-a`, and a cycle's `right.orders` matches from its second word. Heartbeats
    are always mirrored, whatever the whitelist, as MirrorMaker 2 does: they are how a chain of flows and
    the flow itself are seen to be alive.
    """
    excluded = f"(?!(?:{exclude})$)" if exclude else ""
    internal = "\\.internal" if separator == "." else f"(?:\\.|{re.escape(separator)})internal"
    return (f"^(?!__)(?!.*{internal}$){policy.exclusion_regex()}{excluded}"
            f"(?:{whitelist}|{policy.heartbeats_regex()})$")


def selects(pattern: str, topic: str) -> bool:
    return re.fullmatch(pattern, topic) is not None


# Settings of the target cluster, not of the topic's data: MirrorMaker 2's DefaultConfigPropertyFilter,
# plus tiered storage, which the target may not have (retention.ms still says how long data is kept).
NOT_COPIED_TOPIC_CONFIGS = frozenset({
    "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
    "message.timestamp.difference.max.ms", "message.timestamp.type", "unclean.leader.election.enable",
    "min.insync.replicas", "remote.storage.enable", "local.retention.ms", "local.retention.bytes",
})


def topic_configs_to_copy(configs: dict[str, str]) -> dict[str, str]:
    """The source topic's own configs (those set on the topic) that its mirror in the target gets."""
    return {k: v for k, v in configs.items() if k not in NOT_COPIED_TOPIC_CONFIGS}


def topic_config_changes(source: dict[str, str], target: dict[str, str]) -> dict[str, str]:
    """What to set on a target topic so that it has its source topic's configs. A config set only on
    the target is left alone (as MirrorMaker 2 with use.defaults.from=target): an operator's choice."""
    return {k: v for k, v in topic_configs_to_copy(source).items() if target.get(k) != v}


def topic_config_deletions(previous_source: dict[str, str], source: dict[str, str], target: dict[str, str]) -> set[str]:
    """What to delete on a target topic: configs its source topic had when last seen and no longer has,
    where the target still holds the value copied from it. A config set only on the target was never on
    the source (or was changed on the target since): an operator's choice, left alone."""
    before, now = topic_configs_to_copy(previous_source), topic_configs_to_copy(source)
    return {k for k, v in before.items() if k not in now and target.get(k) == v}
