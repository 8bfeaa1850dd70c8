"""The fence's timing, every interval from the election's session, and the clocks a lease is checked on
(docs/decisions.md §6)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger("mirrord.fencing")


# -- the timing: every interval of the fence, from the election's session ----------------------------------------
def lease_ms(session_ms: int) -> int:
    """The lease: half the election's session, counted from the start of the last confirmed commit."""
    return session_ms // 2


@dataclass(frozen=True)
class Timing:
    """The fence's intervals from `leader.session.timeout.ms` (S): lease + max.block.ms + delivery.timeout.ms +
    guard = S. A record accepted before the lease ran out enters the producer within max.block.ms and is
    delivered or failed within delivery.timeout.ms, so the last byte this host sends leaves a guard's time
    before the coordinator may give the flow to another host."""

    session_ms: int

    @property
    def lease_ms(self) -> int:
        return lease_ms(self.session_ms)

    @property
    def block_ms(self) -> int:
        """The producer's max.block.ms: how long a record may wait for metadata or buffer space before it is
        in a batch."""
        return self.session_ms // 10

    @property
    def guard_ms(self) -> int:
        """Left for the network to carry the last request, and for clock-rate differences."""
        return self.session_ms // 10

    @property
    def delivery_ms(self) -> int:
        """The producer's delivery.timeout.ms: 3/10 of the session."""
        return self.session_ms - self.lease_ms - self.block_ms - self.guard_ms

    @property
    def quarantine_ms(self) -> int:
        """After a lapse, no new lease until what the old one let through was delivered or failed."""
        return self.block_ms + self.delivery_ms

    @property
    def confirm_every_ms(self) -> int:
        return max(100, self.session_ms // 10)

    @property
    def heartbeat_ms(self) -> int:
        """A standby hears of a dead host's expired session at its next heartbeat: a take-over within S + S/10."""
        return max(100, self.session_ms // 10)


def bound_producer(sink: Mapping[str, str], producer, session_ms: int) -> dict[str, str]:
    """The sink's options (`kafka.*`) with the producer's timeouts inside the lease's budget (`Timing`), so a
    record not delivered in time fails instead of landing after another host took the flow over:
    delivery.timeout.ms and max.block.ms at most the budget's, request.timeout.ms what delivery leaves after
    linger.ms (Kafka wants delivery >= linger + request). Larger values in producer.properties (`producer`: its
    ClientConfig) are lowered, with a line in the journal; a linger.ms over half the delivery time is refused."""
    timing = Timing(session_ms)
    given = producer.properties

    def number(key: str) -> int | None:
        if key not in given:
            return None
        try:
            return int(str(given[key]).strip())
        except ValueError:
            raise producer.error(key, f"must be a whole number of milliseconds, got {given[key]!r}") from None

    out = dict(sink)
    linger = number("linger.ms")
    linger = int(out.get("kafka.linger.ms", "0")) if linger is None else linger
    delivery = min(timing.delivery_ms, number("delivery.timeout.ms") or timing.delivery_ms)
    if linger * 2 > delivery:
        raise producer.error("linger.ms", f"{linger} leaves less than half of the {delivery} ms a record may take to "
                                          f"be delivered under leader election (leader.session.timeout.ms="
                                          f"{session_ms}, docs/decisions.md §6): lower it, or raise the session")
    bounds = {"delivery.timeout.ms": delivery, "request.timeout.ms": delivery - linger,
              "max.block.ms": timing.block_ms}
    for key, bound in bounds.items():
        value = number(key)
        if value is not None and value > bound:
            log.warning("%s: %s = %d lowered to %d: under leader election a record not delivered within the lease "
                        "must fail instead of landing after a standby took over (leader.session.timeout.ms=%d, "
                        "docs/decisions.md §6)", producer.path.name, key, value, bound, session_ms)
        out[f"kafka.{key}"] = str(bound if value is None else min(value, bound))
    return out


# -- the clocks ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stamp:
    """A moment on two clocks: `boot`, monotonic and counting a suspension (CLOCK_BOOTTIME, where there is one),
    and `wall`, which counts a paused VM once its time is corrected."""

    boot: float
    wall: float


_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


class Clock:
    """The fence's clocks; tests inject their own."""

    def stamp(self) -> Stamp:
        return Stamp(time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic(), time.time())

    def age(self, then: Stamp) -> float:
        """Seconds since `then` by whichever clock says more: a lease is over when either clock says so."""
        now = self.stamp()
        return max(now.boot - then.boot, now.wall - then.wall)
