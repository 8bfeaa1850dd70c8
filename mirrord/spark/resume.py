"""Where a streaming query resumes: Spark's checkpoint, or the offsets committed to the source group.

The checkpoint is where Spark resumes on its own. The consumer group on the source holds the offsets
the target acknowledged (committed every half second, and at each batch's end): a host taking over, or a
restart after a stop that drained the producers, resumes from there when the group is ahead of the
checkpoint, so nothing is copied twice. A first start resumes from the group's offsets where it has
them (a MirrorMaker 1 deployment with the same group.id switches over without re-copying), else from
`auto.offset.reset`.
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


def resume(settings: Settings, starting: str, source: admin.Cluster, topics: dict[str, int]) -> Resume:
    """Where the next query starts: the checkpoint (Spark ignores `startingOffsets` then: "earliest"), or,
    per partition, the furthest of the checkpoint's and the group's offsets, `starting` (auto.offset.reset)
    where neither has one. A checkpoint the group has passed is dropped (the records between were
    acknowledged by the target, and would be copied twice), and so is one pointing below the source's log
    start: those records were deleted unread (reported in `lost`), and real-time mode's reader cannot
    skip them itself."""
    mine = checkpoint_offsets(settings) if has_checkpoint(settings) else {}
    committed = source.committed(settings.group_id, topics) if topics else {}
    known = {**mine, **{tp: o for tp, o in committed.items() if o > mine.get(tp, -1)}}
    held = source.log_start_offsets(known) if known else {}
    lost = {tp: (o, held[tp]) for tp, o in known.items() if tp in held and o < held[tp]}
    if has_checkpoint(settings):
        ahead = {tp for tp, o in committed.items() if o > mine.get(tp, -1)}
        if not ahead and not lost:
            return Resume("earliest")
        if ahead:
            log.info("resuming from group %s's offsets, ahead of the checkpoint on %d partitions (the target "
                     "acknowledged those records)", settings.group_id, len(ahead))
    elif committed:
        log.info("resuming from group %s's committed offsets on %d partitions (no batch in the checkpoint)",
                 settings.group_id, len(committed))
    # A checkpoint with no batch committed still holds the offsets its first start resolved, which Spark
    # would take over `startingOffsets`.
    shutil.rmtree(settings.checkpoint_dir, ignore_errors=True)
    if not committed and not mine:
        return Resume(starting)
    known.update({tp: stop for tp, (_, stop) in lost.items()})
    return Resume(_spec(topics, known, -2 if starting == "earliest" else -1), lost)
