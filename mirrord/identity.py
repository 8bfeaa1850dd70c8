"""Who a flow is on the target: one identity, every name the flow owns there derived from it (docs/decisions.md §6).

A flow is its name (`flow`), the id of the source cluster it copies (Kafka's `clusterId`, which the cluster
chose at its creation and no other cluster shares) and the consumer group it commits its positions to there
(`group.id`, as a short hash: the names stay short and legal whatever the group's name). The hosts of one flow
agree on all three (they must share the group to resume from each other's positions). Two regions aggregated
into one target from one template (the same `flow`, `group.id` and aliases) differ in the cluster id; two flows
of one source with the packaged name `default` differ in their groups (as they did when the election was keyed
by `group.id` alone); so they never stand each other by, fence each other's producers or resume from each
other's positions.

The names, `<key>` being `<flow>.<cluster id>.<group hash>`: the election (`mirrord-leader.<key>`, its topic with
`.internal`), the transactional ids (`mirrord.<key>-<stream>`) and the committed positions
(`mirrord-positions.<key>.internal`). A cluster id is base64url (letters, digits, `-`, `_`) and the hash hex:
never a `.`, so the flow's name (which may hold `.` and `-`) cannot run into them: two identities never spell
one name.

The names of the release before (`Legacy`) are kept only to upgrade in place: a host waits while hosts of the
old release hold the old election, and a flow adopts the positions it committed under the old names.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass

MAX_TOPIC = 249  # Kafka's longest topic name
GROUP_HASH = 10  # hex digits of the group.id's hash in the flow's names


@dataclass(frozen=True)
class FlowIdentity:
    flow: str
    cluster_id: str  # the source cluster's
    group_id: str  # the source group the flow commits its positions to

    @classmethod
    def of(cls, flow: str, cluster_id: str, group_id: str) -> FlowIdentity:
        """The identity of flow `flow` copying the cluster `cluster_id` under `group_id` (anything but base64url
        in the cluster id made `_`, so that it never holds a `.`)."""
        return cls(flow, re.sub(r"[^A-Za-z0-9_-]", "_", cluster_id), group_id)

    @property
    def group_hash(self) -> str:
        return hashlib.sha256(self.group_id.encode()).hexdigest()[:GROUP_HASH]

    @property
    def key(self) -> str:
        return f"{self.flow}.{self.cluster_id}.{self.group_hash}"

    @property
    def election_group(self) -> str:
        return f"mirrord-leader.{self.key}"

    @property
    def election_topic(self) -> str:
        return _topic(f"{self.election_group}.internal")

    @property
    def positions_topic(self) -> str:
        """The source positions the flow's transactions commit (exactly once, §12), as MirrorMaker 2 keeps its
        source offsets in `mm2-offsets.<alias>.internal`: `.internal` keeps every mirror from copying it."""
        return _topic(f"mirrord-positions.{self.key}.internal")

    @property
    def transactional_prefix(self) -> str:
        """The flow's transactional ids are `<prefix>-<stream>`: the hosts of one flow share them (a standby
        that takes over fences the active host's producers), two flows never do."""
        return f"mirrord.{self.key}"

    def member_id(self) -> str:
        """A client id for this host's member of the election: the flow and the source cluster it copies, and
        the host's own part, so that `kafka-consumer-groups --describe` names who holds the flow."""
        return f"mirrord.{self.key}.{uuid.uuid4().hex[:12]}"

    def __str__(self) -> str:
        return f"flow {self.flow} of source cluster {self.cluster_id}, group.id {self.group_id}"


@dataclass(frozen=True)
class Legacy:
    """The names mirrord gave a flow before it had one identity: the election by `group.id`, the positions by
    `source.alias`, the transactional ids by `flow` and `source.alias`; two flows could share each of them."""

    group_id: str
    flow: str
    source_alias: str

    @property
    def election_group(self) -> str:
        return f"{self.group_id}.leader"

    @property
    def positions_topic(self) -> str:
        return f"mirrord-positions.{self.source_alias}.internal"

    @property
    def transactional_prefix(self) -> str:
        return f"mirrord-{self.flow}-{self.source_alias}"


def _topic(name: str) -> str:
    return name[:MAX_TOPIC]
