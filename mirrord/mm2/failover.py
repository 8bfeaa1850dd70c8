"""`mirrord offsets translate`: where a consumer group resumes on the target, for failover runbooks
(MirrorMaker 2's RemoteClusterUtils.translateOffsets, as a command).

It reads the flow's offset syncs back from the target to their end, translates the group's committed
offsets on the source with them (never past the group's true position), and prints one line per
partition. With `--apply` it commits the translation to the group on the target, only while the group
has no members there: a live consumer's offsets are its own, and the broker would refuse anyway.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from mirrord.errors import MirrordError
from mirrord.kafka.admin import TP, Cluster
from mirrord.mm2.checkpoints import group_checkpoints
from mirrord.mm2.offsets import OffsetSyncsReader, OffsetSyncStore
from mirrord.settings.config import Settings
from mirrord.settings.flow import Flow
from mirrord.settings.policy import Policy, selects

EX_TEMPFAIL = 75


class Refused(MirrordError):
    """--apply while the group has members on the target: try again once they stopped."""

    exit_status = EX_TEMPFAIL


@dataclass(frozen=True)
class Row:
    topic: str
    partition: int
    source_offset: int
    target_topic: str
    resume: int | None  # None: no offset sync at or below the source offset yet
    target_committed: int | None

    def line(self) -> str:
        resume = "-" if self.resume is None else str(self.resume)
        now = "-" if self.target_committed is None else str(self.target_committed)
        return f"{self.topic}\t{self.partition}\t{self.source_offset}\t{self.target_topic}\t{resume}\t{now}"


HEADER = "TOPIC\tPARTITION\tSOURCE-OFFSET\tTARGET-TOPIC\tTARGET-OFFSET\tTARGET-COMMITTED"


def rows(group: str, committed: dict[TP, int], syncs: OffsetSyncStore, policy: Policy,
         target_committed: dict[TP, int]) -> list[Row]:
    """One row per partition the group committed on the source, translated or not."""
    translated = group_checkpoints(group, committed, syncs, policy)
    out = []
    for (topic, partition), offset in sorted(committed.items()):
        target_tp = (policy.target_topic(topic), partition)
        cp = translated.get(target_tp)
        out.append(Row(topic, partition, offset, target_tp[0], cp.downstream if cp else None,
                       target_committed.get(target_tp)))
    return out


def run(settings: Settings, group: str, topic_regex: str | None, apply: bool,
        write: Callable[[str], None] = print) -> int:
    flow = Flow.from_settings(settings)  # the clients' settings as the daemon's (a SASL login parsed by Kafka's)
    policy = flow.policy
    quiet = {"log_level": "0"}  # a command's errors are its one line, not librdkafka's retries
    source = Cluster("source", {**flow.source_admin, **quiet})
    target = Cluster("target", {**flow.target_admin, **quiet})
    try:
        source.check()
        target.check()
        syncs_topic = flow.offset_syncs_topic
        if syncs_topic not in target.partitions():
            raise MirrordError(f"no offset syncs on the target ({syncs_topic} does not exist): has this flow "
                               "mirrored anything yet?")
        topics = source.partitions(flow.pattern)
        if settings.topics_exclude:  # the whitelist takes them, topics.exclude keeps them out: never in the target
            excluded = sorted(t for t in source.partitions(settings.topics_exclude) if t not in topics
                              and selects(settings.whitelist, t) and (not topic_regex or re.fullmatch(topic_regex, t)))
            if excluded:
                write(f"not mirrored by this flow (topics.exclude), so not translated: {', '.join(excluded)}")
        if topic_regex:
            topics = {t: n for t, n in topics.items() if re.fullmatch(topic_regex, t)}
        committed = source.committed(group, topics)
        if not committed:
            raise MirrordError(f"group {group!r} has no committed offsets on the source for the mirrored topics"
                               + (f" matching {topic_regex!r}" if topic_regex else ""))
        syncs = OffsetSyncStore()
        reader = OffsetSyncsReader(target, syncs_topic)
        try:
            reader.read_to_end(syncs.add)
        finally:
            reader.close()
        target_topics = {policy.target_topic(t): n for t, n in topics.items()}
        table = rows(group, committed, syncs, policy, target.committed(group, target_topics))
        write(HEADER)
        for row in table:
            write(row.line())
        if apply:
            return _apply(target, group, table, write)
        return 0
    finally:
        source.close()
        target.close()


def _apply(target: Cluster, group: str, table: list[Row], write: Callable[[str], None]) -> int:
    members = target.group_members(group)
    if members:
        raise Refused(f"group {group!r} has {len(members)} active members on the target "
                      f"({', '.join(sorted(members)[:3])}): stop them, then apply again; nothing committed")
    offsets = {(r.target_topic, r.partition): r.resume for r in table if r.resume is not None}
    target.commit(group, offsets)
    untranslated = [f"{r.topic}-{r.partition}" for r in table if r.resume is None]
    write(f"committed {len(offsets)} offsets of group {group} on the target"
          + (f"; not translated yet (no offset sync at or below the group's position): {', '.join(untranslated)}"
             if untranslated else ""))
    return 0
