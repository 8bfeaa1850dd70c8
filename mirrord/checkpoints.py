"""Consumer-group offsets translated into the target cluster, for failover (MirrorMaker 2's
MirrorCheckpointConnector with sync.group.offsets.enabled).

A group's committed offsets on the source are translated with the offset syncs (offsets.translate:
never past the true position, so a consumer that fails over may re-read, never skip) and committed
to the group of the same name on the target, for mirrored topics only. As in MirrorMaker 2, a target
group with members is left alone, and a target offset only moves forward.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from mirrord.admin import TP, Cluster
from mirrord.offsets import OffsetSyncStore
from mirrord.policy import Policy, selects

log = logging.getLogger(__name__)


def translated_offsets(committed: Mapping[TP, int], syncs: OffsetSyncStore, policy: Policy,
                       target_committed: Mapping[TP, int]) -> dict[TP, int]:
    """Target (topic, partition) → offset for one group, where translation moves it forward."""
    out = {}
    for (topic, partition), offset in committed.items():
        translated = syncs.translate(topic, partition, offset)
        target_tp = (policy.target_topic(topic), partition)
        if translated is not None and translated > target_committed.get(target_tp, -1):
            out[target_tp] = translated
    return out


def wanted_group(group: str, groups: str, exclude: str, own: str) -> bool:
    return group != own and selects(groups, group) and not (exclude and selects(exclude, group))


def sync_group_offsets(source: Cluster, target: Cluster, topics: Mapping[str, int], syncs: OffsetSyncStore,
                       syncs_lock: threading.Lock, policy: Policy, groups: str, exclude: str, own: str) -> int:
    """One round over the source's groups; returns how many target groups were moved."""
    moved = 0
    target_topics = {policy.target_topic(t): n for t, n in topics.items()}
    try:
        for group in source.consumer_groups():
            if not wanted_group(group, groups, exclude, own):
                continue
            committed = source.committed(group, topics)
            if not committed:
                continue
            if target.group_has_members(group):
                log.debug("group %s has members on the target: its offsets are theirs", group)
                continue
            with syncs_lock:
                changes = translated_offsets(committed, syncs, policy, target.committed(group, target_topics))
            if changes:
                target.commit(group, changes)
                moved += 1
                log.info("group %s: translated offsets committed on the target for %d partitions",
                         group, len(changes))
    finally:
        source.forget_groups(keep=own)
        target.forget_groups()
    return moved
