"""The shape of a workload's source: how many topics, how many partitions, and which topics come late.

`--partitions` is the total over all topics of a workload (the axis of the scaling curve); `--topics T` splits
them into T topics of partitions ÷ T each. One topic keeps today's names (`<prefix>`); several are
`<prefix>-t000`, `<prefix>-t001`, ... and every contender is given one regex that matches all of them,
including the steady stream's late topics, which exist only after the contender started.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    topics: int = 1
    partitions: int = 12  # in all, over the topics
    late: int = 0  # of the steady stream's topics, created only while the measured stream runs

    def __post_init__(self) -> None:
        if self.topics < 1 or self.partitions < 1:
            raise ValueError("a shape needs at least one topic and one partition")
        if self.partitions % self.topics:
            raise ValueError(f"{self.partitions} partitions do not split evenly over {self.topics} topics")
        if not 0 <= self.late < self.topics:
            raise ValueError(f"{self.late} late topics of {self.topics}: at least one topic must exist from the "
                             "start (the probes that tell a contender is copying go there)")

    @classmethod
    def of(cls, topics: int, partitions: int, late: int | None = None) -> Shape:
        """`late` None: a tenth of the topics, at least one, when there are several; none with one topic."""
        if late is None:
            late = max(1, topics // 10) if topics > 1 else 0
        return cls(topics, partitions, late)

    @property
    def per_topic(self) -> int:
        return self.partitions // self.topics

    def names(self, prefix: str) -> list[str]:
        """Every topic of a workload whose topics start with `prefix`, the late ones last."""
        if self.topics == 1:
            return [prefix]
        width = len(str(self.topics - 1))
        return [f"{prefix}-t{i:0{width}d}" for i in range(self.topics)]

    def split(self, names: list[str]) -> tuple[list[str], list[str]]:
        """(topics there from the start, topics created while the stream runs) of a steady workload."""
        return names[:len(names) - self.late], names[len(names) - self.late:]

    def pattern(self, prefix: str) -> str:
        """One regex (matched against the whole name, as every contender does) for all of the workload's topics,
        those not created yet included; no commas, since MirrorMaker 2 splits its `topics` list at them."""
        return re.escape(prefix) if self.topics == 1 else re.escape(prefix) + r"-t[0-9]+"

    def label(self) -> str:
        """How the tables name the shape."""
        if self.topics == 1:
            return f"{self.partitions:,} partitions"
        late = f", {self.late} created during the stream" if self.late else ""
        return f"{self.partitions:,} partitions: {self.topics} topics × {self.per_topic}{late}"

    def key(self) -> tuple[int, int, int]:
        """Sort order of the scaling table: by partitions, then by topics."""
        return self.partitions, self.topics, self.late

    @classmethod
    def from_config(cls, cfg: dict) -> Shape:
        """The shape of a run's results (`config`); runs from before `--topics` had one topic."""
        return cls(cfg.get("topics", 1), cfg["partitions"], cfg.get("late_topics", 0))


def slots(topics: list[str], partitions: int) -> list[tuple[str, int]]:
    """Every (topic, partition), interleaved so that consecutive records go to different topics: record i goes
    to slots[i % len(slots)], an even spread over all topics and partitions."""
    return [(t, p) for p in range(partitions) for t in topics]
