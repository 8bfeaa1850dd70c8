"""Which of Spark's two trigger modes runs the flow, with how many streams, and why (docs/decisions.md §1, §4).

mirrord's source (jvm/, `io.mirrord.source`) reads the flow's partitions in `num.streams` streams, each
one Spark task with one consumer polling a group of partitions, as MirrorMaker 1's streams and
MirrorMaker 2's tasks. Real-time mode (Spark 4.2, `trigger(realTime=...)`) keeps every stream's task
running for a whole batch: a record is read, sent and acknowledged in milliseconds, and the batch is only
how often Spark checkpoints. It needs a task slot per stream and one spare (without the spare, planning
the next batch waits for a slot). Micro-batch mode plans a batch every `offset.commit.interval.ms`, a task
per stream with records to read, at the cost of latency.

The number of partitions no longer decides anything: a stream reads as many as the whitelist selects.
`num.streams` defaults to a stream per task slot: the host's cores on mirrord's own local master, the
executors' cores less the spare on a cluster. `trigger = auto` (the default) picks real-time mode
wherever the slots allow, micro-batch where they do not. The choice is plain data, logged, put in
STATUS and exported as `mirrord_mode`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mirrord.settings.keys import AUTO, CHOICES, MICRO_BATCH, REAL_TIME  # noqa: F401 - the `trigger` key's values

SPARE_SLOTS = 1  # beyond one task per stream: planning the next batch must not wait for a slot


@dataclass(frozen=True)
class Mode:
    name: str  # REAL_TIME or MICRO_BATCH
    reason: str  # one line, for the log and STATUS
    streams: int = 1  # the source's streams: num.streams, or a stream per task slot

    @property
    def real_time(self) -> bool:
        return self.name == REAL_TIME


def slots_needed(streams: int) -> int:
    return streams + SPARE_SLOTS


def default_streams(num_streams: int | None, cores: int, cluster_slots: int | None = None) -> int:
    """The streams of a flow: `num.streams` when set; else a stream per core of the host for mirrord's own
    local master, or per task slot but the spare on a cluster (`cluster_slots`, Spark's defaultParallelism)."""
    if num_streams:
        return num_streams
    if cluster_slots is not None:
        return max(1, cluster_slots - SPARE_SLOTS)
    return max(1, cores)


def local_slots(streams: int) -> int:
    """Task slots of mirrord's default master, `local[N]`: a slot per stream and the spare."""
    return slots_needed(streams)


def master_slots(master: str, cores: int) -> int | None:
    """Task slots of a `local` master (`local`, `local[N]`, `local[*]`, `local[N,F]`); None for a cluster
    master, whose slots Spark tells once its executors registered (defaultParallelism)."""
    match = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if match is None:
        return None
    if match.group(1) is None:
        return 1
    return cores if match.group(1) == "*" else int(match.group(1))


def choose(setting: str, streams: int, slots: int, transforms_refused: str = "") -> Mode:
    """The mode for a query of `streams` streams on a master with `slots` task slots. `setting` is the
    `trigger` key; `transforms_refused` is why Spark refuses the transforms in real-time mode (empty when it
    accepts them)."""
    if setting == MICRO_BATCH:
        return Mode(MICRO_BATCH, f"trigger = micro-batch, {streams} streams", streams)
    why_not = ""
    if transforms_refused:
        why_not = f"the transforms cannot run in real-time mode ({transforms_refused})"
    elif slots < slots_needed(streams):
        why_not = (f"{streams} streams need {slots_needed(streams)} task slots in real-time mode, the Spark master "
                   f"has {slots}")
    if not why_not:
        return Mode(REAL_TIME, f"{streams} streams, {slots} task slots", streams)
    if setting == REAL_TIME:
        return Mode(MICRO_BATCH, f"trigger = real-time, but {why_not}", streams)
    return Mode(MICRO_BATCH, why_not, streams)


def check_line(setting: str, transforms: int) -> str:
    """What `mirrord --check` says of the trigger, in one line. Transforms are filters and projections (SQL
    expressions in a WHERE and a SELECT), which real-time mode runs; it refuses only stateful operations
    (aggregations, deduplication, stream-stream joins), which a transform cannot express."""
    what = {AUTO: "auto: real-time mode where the task slots allow, micro-batch elsewhere",
            REAL_TIME: "real-time: real-time mode, micro-batch where the task slots do not allow it",
            MICRO_BATCH: "micro-batch: micro-batch mode"}[setting]
    if transforms and setting != MICRO_BATCH:
        sections = "the transform runs" if transforms == 1 else f"the {transforms} transforms run"
        what += f"; {sections} in real-time mode (filters and projections)"
    return f"trigger = {what}"
