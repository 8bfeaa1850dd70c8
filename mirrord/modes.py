"""Which of Spark's two trigger modes runs the flow, and why (DESIGN decision 10).

Real-time mode (Spark 4.2, `trigger(realTime=...)`) runs one long task per source partition: a record
is read, sent and acknowledged in milliseconds, and the batch is only how often Spark checkpoints.
It needs a task slot for every source partition and one spare (without the spare, tasks wait for the
batch to end and a record's latency is the batch length). Micro-batch mode plans a batch every
`offset.commit.interval.ms`, with as few slots as `num.streams`, at the cost of latency.

`trigger = auto` (the default) picks real-time mode wherever the slots allow, and micro-batch where
they do not: more partitions than the slots (a Spark cluster without the cores, or partitions added
beyond a local master's headroom), more than `REAL_TIME_MAX_PARTITIONS`, or, on a local master, more
than `REAL_TIME_PARTITIONS_PER_CORE` per core of the host. The choice is plain data,
logged, put in STATUS and exported as `mirrord_mode`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

AUTO = "auto"
REAL_TIME = "real-time"
MICRO_BATCH = "micro-batch"
CHOICES = (AUTO, REAL_TIME, MICRO_BATCH)
# Above this many source partitions `auto` takes micro-batch mode on any master.
REAL_TIME_MAX_PARTITIONS = 512
# On a local master, above this many source partitions per core of the host (BENCHMARKS.md, partition
# scaling, 2 cores): at 96 partitions (48 a core) real-time mode ran, slower to deliver than at 12 yet ahead
# of micro-batch mode; at 480 (240 a core) its 480 consumers' fetch buffers ran the default 1 GiB driver
# heap out of memory before a record was copied.
REAL_TIME_PARTITIONS_PER_CORE = 48
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


def local_real_time_pays(partitions: int, cores: int) -> bool:
    """Whether `auto` may run real-time mode on a local master of a host with `cores` cores."""
    return partitions <= REAL_TIME_PARTITIONS_PER_CORE * cores


def choose(setting: str, partitions: int, slots: int, transforms_refused: str = "", cores: int | None = None) -> Mode:
    """The mode for a query over `partitions` source partitions with `slots` task slots. `setting` is
    the `trigger` key; `transforms_refused` is why Spark refuses the transforms in real-time mode
    (empty when it accepts them); `cores` the host's, for a local master (None for a cluster)."""
    if setting == MICRO_BATCH:
        return Mode(MICRO_BATCH, "trigger = micro-batch")
    why_not = ""
    if transforms_refused:
        why_not = f"the transforms cannot run in real-time mode ({transforms_refused})"
    elif setting == AUTO and partitions > REAL_TIME_MAX_PARTITIONS:
        why_not = f"{partitions} source partitions, more than real-time mode pays for ({REAL_TIME_MAX_PARTITIONS})"
    elif setting == AUTO and cores is not None and not local_real_time_pays(partitions, cores):
        why_not = (f"{partitions} source partitions, more than real-time mode pays for on {cores} cores in local "
                   f"mode ({REAL_TIME_PARTITIONS_PER_CORE} a core)")
    elif slots < slots_needed(partitions):
        why_not = (f"{partitions} source partitions need {slots_needed(partitions)} task slots in real-time mode, "
                   f"the Spark master has {slots}")
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
