"""Which of Spark's two trigger modes runs the flow, and why (DESIGN decision 10).

Real-time mode (Spark 4.2, `trigger(realTime=...)`) runs one long task per source partition: a record
is read, sent and acknowledged in milliseconds, and the batch is only how often Spark checkpoints.
It needs a task slot for every source partition and one spare (without the spare, tasks wait for the
batch to end and a record's latency is the batch length). Micro-batch mode plans a batch every
`offset.commit.interval.ms`, with as few slots as `num.streams`, at the cost of latency.

`trigger = auto` (the default) picks real-time mode wherever the slots allow, and micro-batch where
they do not: more partitions than the slots (a Spark cluster without the cores, or partitions added
beyond a local master's headroom), or more than `REAL_TIME_MAX_PARTITIONS`. The choice is plain data,
logged, put in STATUS and exported as `mirrord_mode`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

AUTO = "auto"
REAL_TIME = "real-time"
MICRO_BATCH = "micro-batch"
CHOICES = (AUTO, REAL_TIME, MICRO_BATCH)
# Measured on 2 cores (BENCHMARKS.md, partition scaling): real-time mode at 96 partitions still copied faster
# and delivered sooner than MirrorMaker 2 and micro-batch mode. Above this, `auto` takes micro-batch mode.
REAL_TIME_MAX_PARTITIONS = 512
SPARE_SLOTS = 1  # beyond one task per partition: planning the next batch must not wait for a slot
LOCAL_SLOTS_MIN = 32  # local mode makes task threads on demand: slots no task uses cost nothing


@dataclass(frozen=True)
class Mode:
    name: str  # REAL_TIME or MICRO_BATCH
    reason: str  # one line, for the log and STATUS

    @property
    def real_time(self) -> bool:
        return self.name == REAL_TIME


def slots_needed(partitions: int) -> int:
    return partitions + SPARE_SLOTS


def local_slots(partitions: int, num_streams: int) -> int:
    """Task slots of mirrord's default master, `local[N]`: one per partition, the spare, and a quarter more
    (at least `LOCAL_SLOTS_MIN` in all), so that topics and partitions added while mirrord runs keep
    real-time mode; never fewer than `num.streams` (micro-batch mode's parallelism, MirrorMaker 1's
    streams)."""
    return max(num_streams, LOCAL_SLOTS_MIN, slots_needed(partitions) + max(2, partitions // 4))


def master_slots(master: str, cores: int) -> int | None:
    """Task slots of a `local` master (`local`, `local[N]`, `local[*]`, `local[N,F]`); None for a cluster
    master, whose slots Spark tells once its executors registered (defaultParallelism)."""
    match = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if match is None:
        return None
    if match.group(1) is None:
        return 1
    return cores if match.group(1) == "*" else int(match.group(1))


def choose(setting: str, partitions: int, slots: int, transforms_refused: str = "") -> Mode:
    """The mode for a query over `partitions` source partitions with `slots` task slots. `setting` is
    the `trigger` key; `transforms_refused` is why Spark refuses the transforms in real-time mode
    (empty when it accepts them)."""
    if setting == MICRO_BATCH:
        return Mode(MICRO_BATCH, "trigger = micro-batch")
    why_not = ""
    if transforms_refused:
        why_not = f"the transforms cannot run in real-time mode ({transforms_refused})"
    elif slots < slots_needed(partitions):
        why_not = (f"{partitions} source partitions need {slots_needed(partitions)} task slots in real-time mode, "
                   f"the Spark master has {slots}")
    elif setting == AUTO and partitions > REAL_TIME_MAX_PARTITIONS:
        why_not = f"{partitions} source partitions, more than real-time mode pays for ({REAL_TIME_MAX_PARTITIONS})"
    if not why_not:
        return Mode(REAL_TIME, f"{partitions} source partitions, {slots} task slots")
    if setting == REAL_TIME:
        return Mode(MICRO_BATCH, f"trigger = real-time, but {why_not}")
    return Mode(MICRO_BATCH, why_not)


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
