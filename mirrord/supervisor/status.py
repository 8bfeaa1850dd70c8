"""The one human line of STATUS= (and of the journal every 10 s): what mirrord is doing, plainly, ending
with the supervisor's state (states.py)."""

from __future__ import annotations

from mirrord.positions import Positions
from mirrord.spark.modes import Mode


def status_line(positions: Positions, rate: float, mode: Mode | None, away: list[str], standby: str | None,
                state: str, exactly_once: bool = False) -> str:
    """`away`: the clusters that do not answer; `standby`: why this host stands by (Election.standby_reason);
    `state`: the supervisor's (states.Phase); `exactly_once`: delivery = exactly-once."""
    p = positions
    lag = "?" if p.lag is None else p.lag
    topics = "?" if p.topics is None else p.topics
    lost = f", {p.lost} records lost (deleted before read)" if p.lost else ""
    running = (f", {mode.name} mode" if mode is not None else "") + (", exactly once" if exactly_once else "")
    line = (f"{p.mirrored} records mirrored, {rate:.0f} records/s, lag {lag} records, {topics} topics{running}{lost}"
            f"; state {state}")
    if away:
        return f"waiting: {'; '.join(away)}; {line}"
    if standby is not None:
        return f"standby: {standby}; {line}"
    return line
