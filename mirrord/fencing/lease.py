"""The lease in Spark's JVM (io.mirrord.fencing.Fence), granted from the election's confirmations
(docs/decisions.md §6)."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from mirrord.errors import Fenced, NotConfirmed
from mirrord.fencing.timing import Stamp

if TYPE_CHECKING:  # the election is handed to the lease; neither module imports the other when it runs
    from mirrord.fencing.election import Election

log = logging.getLogger("mirrord.fencing")


# -- the lease ------------------------------------------------------------------------------------------------------
class JvmFence:
    """io.mirrord.fencing.Fence in Spark's JVM, over py4j: the one place mirrord's Python talks to it."""

    def __init__(self, spark):
        self._spark = spark
        self._jvm_fence = None  # the JVM's one Fence, asked for once (it pulses four times a second)

    def _fence(self):
        if self._jvm_fence is None:
            from mirrord.spark.session import jvm_class

            self._jvm_fence = jvm_class(self._spark, "io.mirrord.fencing.Fence").jvm()
        return self._jvm_fence

    def configure(self, quarantine_ms: int) -> None:
        self._fence().configure(quarantine_ms)

    def grant(self, valid_for_ms: int, wall_deadline_ms: int) -> bool:
        return bool(self._fence().grant(valid_for_ms, wall_deadline_ms))

    def pulse(self) -> str:
        return str(self._fence().pulse())

    def release(self) -> None:
        self._fence().release()

    def revoke(self) -> None:
        self._fence().revoke()

    def in_flight(self) -> int:
        from mirrord.spark.session import in_flight

        return in_flight(self._spark)

    def gone(self, wait: float = 0.0) -> bool:
        """Whether Spark's JVM has exited, waiting up to `wait` seconds for it."""
        from mirrord.spark.session import jvm_exit_status

        deadline = time.monotonic() + wait
        while jvm_exit_status() is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True


HELD, LAPSED, FENCED, OFF = "HELD", "LAPSED", "FENCED", "OFF"


class Lease:
    """The active host's lease in the JVM that sends the records (`jvm`: io.mirrord.fencing.Fence), granted from
    the election's confirmations by a thread of its own while the query runs (`held`), with a pulse every
    `EVERY` seconds that says the supervisor answers. A supervisor that stopped answering (a hung interpreter,
    SIGSTOP) pulses no more: its JVM halts once the lease runs out. One that answers but cannot confirm the
    election (an outage, a partition) lets the lease run out: records are refused and fail, the JVM goes on,
    and the query restarts once this host is elected and confirmed again."""

    EVERY = 0.25

    def __init__(self, spark, election: Election, jvm=None, start: bool = True):
        self.election = election
        self.timing = election.timing
        self.clock = election.clock
        self.jvm = jvm if jvm is not None else JvmFence(spark)
        self.jvm.configure(self.timing.quarantine_ms)
        self.held = False
        self._turn = threading.RLock()  # a grant (the lease's thread) and a release or revoke never interleave
        self._ended = False
        self.state = OFF
        self.until: Stamp | None = None  # the end of the last lease granted
        election.lease = self
        if start:
            threading.Thread(target=self._loop, name="lease", daemon=True).start()

    def _grant(self) -> bool:
        last = self.election.confirmed()
        if last is None:
            return False
        remaining = self.timing.lease_ms - self.clock.age(last) * 1000
        if remaining < 1:
            return False
        granted = self.jvm.grant(int(remaining), int(last.wall * 1000) + self.timing.lease_ms)
        if granted:
            self.until = Stamp(last.boot + self.timing.lease_ms / 1000, last.wall + self.timing.lease_ms / 1000)
        return granted

    def tick(self) -> str:
        """One turn: the lease granted again from the last confirmation while held, then a pulse."""
        with self._turn:  # else a release between `held` and the grant is undone by it
            if self.held:
                self._grant()
            state = self.jvm.pulse()
        if state != self.state:
            if state == LAPSED:
                log.warning("the lease lapsed: this host has not confirmed its hold on the flow for %.1fs; records "
                            "are refused, and those buffered fail (docs/decisions.md §6)", self._unconfirmed())
            elif state == HELD and self.state == LAPSED:
                log.info("the lease is granted again: this host's hold on the flow is confirmed")
            self.state = state
        return state

    def _unconfirmed(self) -> float:
        last = self.until
        return float("nan") if last is None else self.clock.age(last) + self.timing.lease_ms / 1000

    def _loop(self) -> None:
        """Pulses for as long as the process lives, also while mirrord stops (a stop may wait a minute for the
        target's acknowledgements), until the JVM is gone."""
        while not self._ended and self.turn():
            time.sleep(self.EVERY)

    def end(self) -> None:
        """mirrord is stopping Spark after a clean stop: no more pulses to a JVM on its way out."""
        self.held = False
        self._ended = True

    def turn(self) -> bool:
        """A tick; False once Spark's JVM is gone (it halted when the lease was fenced, or exited), which ends the
        election's membership at once: a standby takes over now, not a session later."""
        try:
            self.tick()
        except Exception as exc:  # noqa: BLE001 - py4j errors of several kinds while the JVM goes
            if self.jvm.gone(wait=1.0):
                log.error("Spark's JVM is gone (fenced, or it exited): leaving the flow's election")
                self.held = False
                self.election.close()
                return False
            log.warning("cannot reach the lease in Spark's JVM: %s", exc)
        return True

    def hold(self) -> None:
        """The query is about to start: the lease granted now, or the start refused (NotConfirmed, retried;
        Fenced when this host is fenced)."""
        with self._turn:
            if self.jvm.pulse() == FENCED:
                raise Fenced("this host is fenced: restart as a standby")
            if not self._grant():
                raise NotConfirmed("this host's hold on the flow is not confirmed now (the election's coordinator "
                                   "has not accepted a commit within the lease, or a lapsed lease's records may "
                                   "still be delivered)")
            self.held = True
            self.state = HELD

    def quarantined_for(self) -> float:
        """Seconds until a new lease may be granted after the last one lapsed (io.mirrord.fencing.Fence's
        quarantine: what the lapsed lease let through is delivered or failed first); 0 when that is over."""
        if self.until is None:
            return 0.0
        return max(0.0, self.timing.quarantine_ms / 1000 - self.clock.age(self.until))

    def release(self) -> None:
        """This host stopped mirroring on purpose: no lease, and nothing to fence."""
        with self._turn:
            self.held = False
            self.jvm.release()

    def revoke(self) -> None:
        """Fence now: every record refused, the JVM halted at once with what its producers buffered."""
        with self._turn:
            self.held = False
            self.jvm.revoke()

    def fence(self) -> None:
        """This host lost the flow while mirroring (another host holds it): revoke, wait for the JVM to halt,
        and leave the election."""
        self.step_down("this host lost the flow's election while mirroring (its JVM halts with whatever its "
                       "producers still buffered; the next active host resumes from the acknowledged offsets)")
        self.election.close()

    def step_down(self, why: str = "") -> None:
        """A lease in force revoked, and the JVM waited for until it halted: before the election's partition goes
        to another member (the election's thread), before mirrord exits on an error (atexit), on a hand-over."""
        try:
            state = self.jvm.pulse()
            if state in (HELD, LAPSED):
                log.error("%s: fencing this host first", why or "this host is leaving the flow's election while it "
                                                               "holds a lease")
                self.revoke()
            elif state != FENCED:
                return  # no lease in force: nothing was sent under one that is not settled
        except Exception as exc:  # noqa: BLE001 - the JVM is gone already, or halts while py4j talks to it
            log.debug("fencing: %s", exc)
        self.jvm.gone(wait=5.0)

    def settle(self, patience: float | None = None) -> None:
        """Before this host leaves the election: wait until nothing it sent under a lease can still be
        delivered: the JVM gone, or its producers with nothing in flight, or the last lease plus what a record
        may take after it (max.block.ms and delivery.timeout.ms) over."""
        if self.until is None:
            return
        deadline = time.monotonic() + (patience if patience is not None else
                                       (self.timing.lease_ms + self.timing.quarantine_ms) / 1000)
        while time.monotonic() < deadline:
            try:
                if self.jvm.gone() or self.jvm.in_flight() == 0:
                    return
            except Exception:  # noqa: BLE001 - the JVM went meanwhile
                return
            if self.quarantined_for() == 0:
                return
            time.sleep(0.05)
