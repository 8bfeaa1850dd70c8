"""Where a streaming query resumes: the positions' owner's commits to the source group, else Spark's
checkpoint, else `auto.offset.reset`.

The consumer group on the source holds what the target acknowledged, committed by the positions' owner
in the JVM every 250 ms with the topic's id in the commit's metadata (docs/decisions.md §10). Where the
id is the topic's id now, the commit is the truth for this incarnation of the topic and the partition
resumes there (a checkpoint ahead of it may be from before the topic was recreated: the few records
between are copied again rather than risk skipping); where the id differs, the topic was recreated
since, and the partition is read from its start. Commits without mirrord's metadata (a MirrorMaker 1
deployment with the same group.id, or mirrord before 0.4) count where they are ahead of the checkpoint.
When every partition resumes where the checkpoint says, Spark resumes from the checkpoint on its own.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass, field

from mirrord.kafka import admin
from mirrord.kafka.admin import TP
from mirrord.mm2.offsets import parse_source_offsets
from mirrord.settings.config import Settings

log = logging.getLogger(__name__)


def has_checkpoint(settings: Settings) -> bool:
    offsets = settings.checkpoint_dir / "offsets"
    return offsets.is_dir() and any(offsets.iterdir())


def checkpoint_offsets(settings: Settings) -> dict[tuple[str, int], int]:
    """Where the checkpoint resumes: the end offsets of its last committed batch (empty when none)."""
    checkpoint = settings.checkpoint_dir
    commits = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*") if p.name.isdigit()]
    if not commits:
        return {}
    try:
        lines = (checkpoint / "offsets" / str(max(commits))).read_text().splitlines()
        return {tp: o for tp, o in parse_source_offsets(lines[2]).items() if o >= 0}
    except (OSError, IndexError, ValueError) as exc:
        log.warning("cannot read the checkpoint's offsets: %s", exc)
        return {}


@dataclass(frozen=True)
class Resume:
    """Where the next query starts (`startingOffsets`), and what the source deleted below that before it
    could be read (per partition, [from, to))."""

    starting: str
    lost: dict[TP, tuple[int, int]] = field(default_factory=dict)


def _spec(topics: dict[str, int], known: dict[TP, int], default: int) -> str:
    return json.dumps({t: {str(p): known.get((t, p), default) for p in range(n)} for t, n in topics.items()})


TOPIC_ID = "mirrord topic-id="  # io.mirrord.positions.Positions.METADATA_PREFIX
ID_LENGTH = 22  # a Kafka Uuid as Java spells it: URL-safe base64, no padding


def committed_id(metadata: str) -> str:
    """The topic id in mirrord's commit metadata: the 22 characters after the prefix. confluent-kafka copies a
    fetched metadata string up to a NUL (mirrord's JVM ends it with one; commits from before 0.5 did not, and
    bytes from past their end could follow)."""
    return metadata.removeprefix(TOPIC_ID)[:ID_LENGTH]


def group_starts(source: admin.Cluster, group: str, topics: dict[str, int],
                 checkpoint: dict[TP, int]) -> dict[TP, int]:
    """Per partition, where the group and the checkpoint say to resume (-2: from the partition's start)."""
    committed = source.committed_with_metadata(group, topics) if topics else {}
    ids = source.topic_ids(topics) if any(m.startswith(TOPIC_ID) for _, m in committed.values()) else {}
    known = dict(checkpoint)
    for tp, (offset, metadata) in committed.items():
        if not metadata.startswith(TOPIC_ID) or tp[0] not in ids:  # no id to judge by: the rule before ids
            known[tp] = max(offset, known.get(tp, -1))
        elif ids[tp[0]] == committed_id(metadata):
            known[tp] = offset
        else:
            log.warning("%s-%d was recreated on the source since group %s's commit: it is read from its start",
                        tp[0], tp[1], group)
            known[tp] = -2
    return known


def resume(settings: Settings, starting: str, source: admin.Cluster, topics: dict[str, int]) -> Resume:
    """Where the next query starts: the checkpoint (Spark ignores `startingOffsets` then: "earliest") when
    every partition resumes where it says, else per partition what `group_starts` says, `starting`
    (auto.offset.reset) where nothing does. A partition resuming below the source's log start had records
    deleted unread (reported in `lost`; real-time mode's reader cannot skip them itself)."""
    mine = checkpoint_offsets(settings) if has_checkpoint(settings) else {}
    known = group_starts(source, settings.group_id, topics, mine)
    held = source.log_start_offsets(tp for tp, o in known.items() if o >= 0)
    lost = {tp: (o, held[tp]) for tp, o in known.items() if tp in held and 0 <= o < held[tp]}
    if has_checkpoint(settings):
        moved = {tp for tp, o in known.items() if o != mine.get(tp)}
        if not moved and not lost:
            return Resume("earliest")
        log.info("resuming from group %s's offsets on %d partitions where the checkpoint says otherwise",
                 settings.group_id, len(moved))
    elif known:
        log.info("resuming from group %s's committed offsets on %d partitions (no batch in the checkpoint)",
                 settings.group_id, len(known))
    # A checkpoint with no batch committed still holds the offsets its first start resolved, which Spark
    # would take over `startingOffsets`.
    shutil.rmtree(settings.checkpoint_dir, ignore_errors=True)
    if not known:
        return Resume(starting)
    known.update({tp: stop for tp, (_, stop) in lost.items()})
    return Resume(_spec(topics, known, -2 if starting == "earliest" else -1), lost)


def resume_committed(settings: Settings, starting: str, source: admin.Cluster, topics: dict[str, int],
                     committed: dict[TP, tuple[int, str | None]], ids: dict[str, str]) -> Resume:
    """Exactly once (docs/decisions.md §12): each partition resumes where the target's committed transactions
    reach (`committed`), whatever Spark's checkpoint says (it is started afresh); a partition no transaction
    reached yet resumes where the source group says (a flow switched from at-least-once), else at `starting`.
    A position of a topic whose id (`ids`, the source's now) is not the one it names, or past the partition's
    end, is from before the topic was recreated: read from its start."""
    known = group_starts(source, settings.group_id, topics, {})
    mine = {tp: p for tp, p in committed.items() if tp[0] in topics and tp[1] < topics[tp[0]]}
    ends = source.end_offsets(mine)
    for tp, (offset, topic_id) in mine.items():
        if topic_id is not None and tp[0] in ids and ids[tp[0]] != topic_id:
            log.warning("%s-%d was recreated on the source since the target committed its position %d: it is read "
                        "from its start", tp[0], tp[1], offset)
            offset = -2
        elif offset > ends.get(tp, offset):
            log.warning("%s-%d ends at %d, before the position %d the target committed: the topic was recreated "
                        "since; it is read from its start", tp[0], tp[1], ends[tp], offset)
            offset = -2
        known[tp] = offset
    held = source.log_start_offsets(tp for tp, o in known.items() if o >= 0)
    lost = {tp: (o, held[tp]) for tp, o in known.items() if tp in held and 0 <= o < held[tp]}
    known.update({tp: stop for tp, (_, stop) in lost.items()})
    log.info("resuming %d partitions from the positions the target committed, %d from group %s", len(mine),
             len(set(known) - set(mine)), settings.group_id)
    shutil.rmtree(settings.checkpoint_dir, ignore_errors=True)
    return Resume(_spec(topics, known, -2 if starting == "earliest" else -1) if known else starting, lost)
