"""Where a streaming query resumes: Spark's checkpoint, or the offsets committed to the source group.

The checkpoint is where Spark resumes on its own. The consumer group on the source holds the offsets
the target acknowledged (committed every second, and at each batch's end): a host taking over, or a
restart after a stop that drained the producers, resumes from there when the group is ahead of the
checkpoint, so nothing is copied twice. A first start resumes from the group's offsets where it has
them (a MirrorMaker 1 deployment with the same group.id switches over without re-copying), else from
`auto.offset.reset`.
"""

from __future__ import annotations

import json
import logging
import shutil

from mirrord import admin
from mirrord.admin import TP
from mirrord.config import Settings
from mirrord.offsets import parse_source_offsets

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


def _spec(topics: dict[str, int], known: dict[TP, int], default: int) -> str:
    return json.dumps({t: {str(p): known.get((t, p), default) for p in range(n)} for t, n in topics.items()})


def resume(settings: Settings, starting: str, source: admin.Cluster, topics: dict[str, int]) -> str:
    """The `startingOffsets` of the next query: "earliest" where the checkpoint decides (Spark ignores the
    option then); else, per partition, the furthest of the checkpoint's and the group's offsets, and
    `starting` (auto.offset.reset) where neither has one. A checkpoint the group has passed is dropped:
    the records between were acknowledged by the target, and would be copied twice."""
    mine = checkpoint_offsets(settings) if has_checkpoint(settings) else {}
    committed = source.committed(settings.group_id, topics) if topics else {}
    ahead = {tp: o for tp, o in committed.items() if o > mine.get(tp, -1)}
    if has_checkpoint(settings):
        if not ahead:
            return "earliest"
        log.info("group %s is ahead of the checkpoint on %d partitions (the target acknowledged those records): "
                 "resuming from the group's offsets", settings.group_id, len(ahead))
        shutil.rmtree(settings.checkpoint_dir)
    elif committed:
        log.info("first start: resuming from group %s's committed offsets on %d partitions", settings.group_id,
                 len(committed))
    else:
        return starting
    known = {**mine, **ahead}
    return _spec(topics, known, -2 if starting == "earliest" else -1)
