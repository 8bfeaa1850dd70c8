"""The supervisor's states and their transitions (docs/decisions.md §11), decided without touching anything.

`step(state, observation)` is a pure function: it returns the next `State` and the actions to take, in
order, and the Daemon carries them out. An action that asks something of the world (the election, the
query, a start) is answered by the Daemon with the next observation. `Machine` keeps the current state,
logs each change of phase once at INFO and exports it as `mirrord_state{flow,state}`.

    STARTING --elected, started--> MIRRORING <--a cluster away / back--> OUTAGE
    STARTING --not elected for STANDBY_AFTER--> STANDBY --elected, started--> MIRRORING
    no query, a cluster away --> WAITING --both answer--> (as STARTING)
    a start or the query failed --> RETRYING --RESTART_BACKOFF (at once: records deleted, executor lost; QUICK_RESTART:
        a repairable failure after a minute without one; a lapsed lease: its quarantine's rest)--> STARTING
    MIRRORING/OUTAGE --another host holds the flow--> FENCED (exit 75)
    any --stop--> STOPPING (exit 0); --JVM exited 75--> FENCED; --what a restart cannot fix--> FAILED
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass, replace
from enum import Enum

from mirrord.errors import EX_TEMPFAIL, ConfigError, Fenced, MirrordError, NotConfirmed
from mirrord.metrics import Metrics

log = logging.getLogger("mirrord")
RESTART_BACKOFF = 5.0
# A query that fails after running a minute without failing restarts after QUICK_RESTART instead, when the cause is
# one a restart from the positions repairs (a delivery, a client's timeout, an aborted transaction) and both
# clusters answer: a loaded target that answered a request late costs a second, not six (docs/decisions.md §11).
QUICK_RESTART = 0.5
STABLE_FOR = 60.0
# Kafka's producer's words for a batch it expired (delivery.timeout.ms passed before the target acknowledged it).
EXPIRED = "has passed since batch creation"
START_ATTEMPTS = 5  # failed starts while both clusters answer before mirrord gives up (and systemd restarts it)
STANDBY_AFTER = 5.0  # no assignment this long after joining the election: another host has it
OUTAGE_MEMORY = 600.0  # a query that fails within this of an outage failed because of it


class Phase(Enum):
    STARTING = "starting"  # no query yet, or a reload restarts it: both clusters answer, the election is asked
    WAITING = "waiting"  # no query: a cluster does not answer (at start-up, or the query failed in an outage)
    STANDBY = "standby"  # no query: another host holds the flow's election
    MIRRORING = "mirroring"  # the query runs, both clusters answer, this host holds the flow
    OUTAGE = "outage"  # the query runs (its batch waits) while a cluster or the election's session is away
    RETRYING = "retrying"  # no query: a start, the query or the election failed; the next start at `retry_at`
    STOPPING = "stopping"  # SIGTERM or SIGINT: the query stops between batches, then the process exits 0
    FENCED = "fenced"  # another host holds the flow, or the JVM fenced itself: exit 75
    FAILED = "failed"  # an error restarting cannot fix here: exit with its status


RUNNING = (Phase.MIRRORING, Phase.OUTAGE)  # a query exists
FINAL = (Phase.STOPPING, Phase.FENCED, Phase.FAILED)


@dataclass(frozen=True)
class State:
    phase: Phase = Phase.STARTING
    ready: bool = False  # READY=1 sent
    announced: bool = False  # the first start's "mirroring … -> …" lines logged
    retry_at: float = 0.0  # no start before this (monotonic seconds)
    start_failures: int = 0  # failed starts since the last that succeeded
    failed_at: float = float("-inf")  # the last query failure (monotonic seconds)

    @property
    def running(self) -> bool:
        return self.phase in RUNNING


# -- observations ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stop:
    """SIGTERM or SIGINT."""


@dataclass(frozen=True)
class Reload:
    """SIGHUP."""


@dataclass(frozen=True)
class Turn:
    """What the supervisor sees every half second."""

    now: float
    away: tuple[str, ...] = ()  # one phrase per cluster that does not answer
    active: bool = True  # this host holds the flow's election (or there is none)
    jvm_exit: int | None = None  # Spark's JVM exited with this status


@dataclass(frozen=True)
class JvmExited:
    """Spark's JVM did not answer; its exit status, if it exited."""

    status: int | None


@dataclass(frozen=True)
class Elected:
    """The election's answer (Do.ASK_ELECTION)."""

    now: float
    elected: bool
    joined_at: float = 0.0  # when this host joined the election (rejoined, after its session lapsed in an outage)
    error: str | None = None  # the election's topic could not be made
    patience: float = STANDBY_AFTER  # how long after joined_at the assignment may come before this host stands by


@dataclass(frozen=True)
class Started:
    """The query started (Do.START)."""


@dataclass(frozen=True)
class StartFailed:
    """The query did not start (Do.START)."""

    now: float  # the turn's
    error: Exception
    why: str  # the error, one line
    up_for: float = 0.0  # seconds both clusters have answered


@dataclass(frozen=True)
class HandOver:
    """Whether another host holds the flow now (Do.ASK_HAND_OVER)."""

    elsewhere: bool


@dataclass(frozen=True)
class QueryFailed:
    """The query failed (Do.ASK_FAILURE); `kind` as session.failure says."""

    now: float  # the turn's
    kind: str
    why: str
    away: bool = False  # a cluster does not answer now
    recent_outage: bool = False  # a cluster was away within OUTAGE_MEMORY
    abort_on_send_failure: bool = False
    quarantined_for: float = RESTART_BACKOFF  # seconds until a lapsed lease may be granted again (Lease)


@dataclass(frozen=True)
class Restart:
    """A reload stopped the query, to start it again with the new settings."""

    now: float
    away: tuple[str, ...] = ()


Observation = Stop | Reload | Turn | JvmExited | Elected | Started | StartFailed | HandOver | QueryFailed | Restart


# -- actions --------------------------------------------------------------------------------------
class Do(Enum):
    READY = "send READY=1 with the STATUS line"
    ANNOUNCE = "log what is mirrored where (the first start)"
    STANDING_BY = "log that another host mirrors the flow"
    REHEARSE = "run the query once over no topic, so that a take-over starts it in a warm JVM"
    ASK_ELECTION = "ask whether this host may mirror (joins the election on first use)"
    START = "start the query"
    ASK_HAND_OVER = "ask whether another host holds the flow"
    ASK_FAILURE = "ask whether the query failed, and how"
    FORGET = "forget the failed query"
    FENCE = "revoke the lease: the JVM halts"
    RELOAD = "apply the changed configuration"
    SHUTDOWN = "stop the query between batches, leave the election, stop Spark"


@dataclass(frozen=True)
class Log:
    level: int
    text: str


@dataclass(frozen=True)
class CountError:
    kind: str  # mirrord_errors_total{kind}


@dataclass(frozen=True, eq=False)
class Exit:
    """Raise `error`: cli turns it into a line and an exit status."""

    error: MirrordError

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Exit) and type(other.error) is type(self.error)
                and str(other.error) == str(self.error))

    __hash__ = None  # type: ignore[assignment]


Action = Do | Log | CountError | Exit


# -- transitions ----------------------------------------------------------------------------------
def step(state: State, seen: Observation) -> tuple[State, list[Action]]:
    """The next state and the actions to take, in order, for one observation."""
    if state.phase in FINAL:
        return state, []
    match seen:
        case Stop():
            return replace(state, phase=Phase.STOPPING), [Do.SHUTDOWN]
        case Reload():
            return state, [Do.RELOAD]
        case Turn():
            return _turn(state, seen)
        case JvmExited(status=status):
            return (state, []) if status is None else _jvm_exited(state, status)
        case Elected():
            return _elected(state, seen)
        case Started():
            actions: list[Action] = [] if state.announced else [Do.ANNOUNCE]
            if not state.ready:
                actions.append(Do.READY)
            return replace(state, phase=Phase.MIRRORING, ready=True, announced=True, start_failures=0), actions
        case StartFailed():
            return _start_failed(state, seen)
        case HandOver(elsewhere=elsewhere):
            if not elsewhere:  # an outage is a state, not a hand-over: the session is rejoined
                return state, []
            return replace(state, phase=Phase.FENCED), [Do.FENCE, Exit(Fenced(
                "lost the flow's election while mirroring: fenced; restart as a standby"))]
        case QueryFailed():
            return _query_failed(state, seen)
        case Restart():
            if state.running:
                state = replace(state, phase=Phase.STARTING)
            return _try_start(replace(state, retry_at=0.0), seen.now, seen.away)
    raise TypeError(f"not an observation: {seen!r}")


def _turn(state: State, turn: Turn) -> tuple[State, list[Action]]:
    if turn.jvm_exit is not None:
        return _jvm_exited(state, turn.jvm_exit)
    if not state.running:
        return _try_start(state, turn.now, turn.away)
    if not turn.active:  # the session lapsed (an outage) or another host holds the flow (a hand-over)
        return replace(state, phase=Phase.OUTAGE), [Do.ASK_HAND_OVER]
    return replace(state, phase=Phase.OUTAGE if turn.away else Phase.MIRRORING), [Do.ASK_FAILURE]


def _try_start(state: State, now: float, away: tuple[str, ...]) -> tuple[State, list[Action]]:
    """READY=1 comes with the first start, or at once while a cluster is away: waiting for it is
    mirrord's normal work, and systemd's start timeout must not turn an outage into a restart loop."""
    if away:
        if state.ready:
            return replace(state, phase=Phase.WAITING), []
        return replace(state, phase=Phase.WAITING, ready=True), [Log(logging.WARNING, f"waiting: {'; '.join(away)}"),
                                                                 Do.READY]
    if now < state.retry_at:
        return replace(state, phase=Phase.RETRYING), []
    return state, [Do.ASK_ELECTION]


def _elected(state: State, answer: Elected) -> tuple[State, list[Action]]:
    if answer.error is not None:
        return (replace(state, phase=Phase.RETRYING, retry_at=answer.now + RESTART_BACKOFF),
                [Log(logging.WARNING, f"{answer.error}; retrying in {RESTART_BACKOFF:.0f}s")])
    if answer.elected:
        return replace(state, phase=Phase.STARTING), [Do.START]
    if answer.now - answer.joined_at <= answer.patience:  # just joined: the assignment may still come
        return replace(state, phase=Phase.STARTING), []
    rehearse = [] if state.phase is Phase.STANDBY else [Do.REHEARSE]
    if state.ready:
        return replace(state, phase=Phase.STANDBY), rehearse
    return replace(state, phase=Phase.STANDBY, ready=True), [Do.STANDING_BY, Do.READY, *rehearse]


def _start_failed(state: State, failed: StartFailed) -> tuple[State, list[Action]]:
    if isinstance(failed.error, Fenced):
        return replace(state, phase=Phase.FENCED), [Exit(failed.error)]
    if isinstance(failed.error, ConfigError):
        return replace(state, phase=Phase.FAILED), [Exit(failed.error)]
    if isinstance(failed.error, NotConfirmed):  # the election's outage: waited out, never a reason to give up
        return replace(state, phase=Phase.RETRYING, retry_at=failed.now + RESTART_BACKOFF), [
            Log(logging.WARNING, f"not starting yet, retrying in {RESTART_BACKOFF:.0f}s: {failed.why}")]
    # Anything else: a cluster that went away meanwhile, most likely; the next round retries.
    state = replace(state, start_failures=state.start_failures + 1)
    if state.start_failures >= START_ATTEMPTS and failed.up_for > START_ATTEMPTS * RESTART_BACKOFF:
        return replace(state, phase=Phase.FAILED), [
            CountError("query"), Exit(MirrordError(f"cannot start the streaming query: {failed.why}"))]
    return replace(state, phase=Phase.RETRYING, retry_at=failed.now + RESTART_BACKOFF), [
        CountError("query"),
        Log(logging.WARNING, f"cannot start the streaming query, retrying in {RESTART_BACKOFF:.0f}s: {failed.why}")]


def _query_failed(state: State, failed: QueryFailed) -> tuple[State, list[Action]]:
    """What a failure means: restart past records deleted before they were read; from the checkpoint
    after an outage (a cluster away now or lately, a client that timed out waiting for one, or a send refused
    because the lease lapsed: the probe may not have seen the cluster go yet; a start is granted a lease again once
    the lapsed one's quarantine is over, so that is the wait, often none after an outage), or after a delivery failure
    unless abort.on.send.failure; at once after Spark lost a task's executor (on a cluster executors come and go);
    stop otherwise."""
    done: list[Action] = [Do.FORGET, CountError(failed.kind)]
    repairable = failed.kind in ("delivery", "timeout", "transaction") and not (failed.away or failed.recent_outage)
    backoff = QUICK_RESTART if repairable and failed.now - state.failed_at >= STABLE_FOR else RESTART_BACKOFF
    if failed.kind == "lapsed" and not failed.away:  # a start is granted a lease once the quarantine is over
        backoff = min(RESTART_BACKOFF, max(QUICK_RESTART, failed.quarantined_for))
    state = replace(state, failed_at=failed.now)
    if failed.kind == "deleted":  # the next start resumes past them, and reports them lost
        return replace(state, phase=Phase.RETRYING, retry_at=failed.now), done + [Log(logging.WARNING, (
            f"the source deleted records before mirrord read them; restarting past them: {failed.why}"))]
    if failed.kind == "timeout" and EXPIRED in failed.why and not (failed.recent_outage or failed.away):
        said = Log(logging.WARNING, (
            "records expired in the producer before the target acknowledged them, while the last probe saw both "
            f"clusters answer; the query restarts from the acknowledged positions in {backoff:g}s (and waits if the "
            "target has gone since). Under leader election a record has "
            "3/10 of leader.session.timeout.ms to be acknowledged: if this recurs, the target is too slow for the "
            "flow's partitions in that time, and a longer session gives them more (docs/decisions.md §6): "
            f"{failed.why}"))
    elif failed.recent_outage or failed.away or failed.kind in ("timeout", "lapsed"):
        said = Log(logging.WARNING, "the streaming query stopped while a cluster was unreachable; it restarts from "
                   f"its checkpoint when both answer: {failed.why}")
    elif failed.kind == "transaction":  # aborted: the next start copies its records again, once (decisions §12)
        said = Log(logging.WARNING, "a transaction could not commit and was aborted; the query restarts from the "
                   f"positions the target committed in {backoff:g}s: {failed.why}")
    elif failed.kind == "executor":  # Spark replaces it; the start resumes where the lost tasks' work was committed
        backoff = 0.0
        said = Log(logging.WARNING, f"Spark lost the executor of a task; the query restarts now: {failed.why}")
    elif failed.abort_on_send_failure or failed.kind != "delivery":
        return replace(state, phase=Phase.FAILED), done + [Exit(MirrordError(f"streaming query failed: {failed.why}"))]
    else:
        said = Log(logging.ERROR, f"batch failed, retrying from the last committed batch in {backoff:g}s: "
                   f"{failed.why}")
    phase = Phase.WAITING if failed.away else Phase.RETRYING
    return replace(state, phase=phase, retry_at=failed.now + backoff), done + [said]


def _jvm_exited(state: State, status: int) -> tuple[State, list[Action]]:
    """Spark's JVM is a process of its own: its exit ends mirrord (systemd restarts it)."""
    if status == EX_TEMPFAIL:
        return replace(state, phase=Phase.FENCED), [Exit(Fenced(
            "this host's lease lapsed while its supervisor was not answering: Spark's JVM fenced itself; "
            "restart as a standby"))]
    return replace(state, phase=Phase.FAILED), [Exit(MirrordError(_jvm_end(status)))]


def _jvm_end(status: int) -> str:
    """How Spark's JVM ended, in words: a negative status is the signal that killed it (Python's `returncode`)."""
    if status >= 0:
        return f"Spark's JVM exited with status {status}"
    try:
        name = signal.Signals(-status).name
    except ValueError:
        name = f"signal {-status}"
    why = " (the kernel's out-of-memory killer sends it: see `journalctl -k`)" if -status == signal.SIGKILL else ""
    return f"Spark's JVM was killed by {name}{why}"


class Machine:
    """The current state: every observation goes through `step`; a change of phase is logged once at INFO
    and exported one-hot as `mirrord_state{flow,state}`."""

    def __init__(self, metrics: Metrics, state: State | None = None):
        self.metrics = metrics
        self.state = state or State()
        self._export()

    @property
    def phase(self) -> Phase:
        return self.state.phase

    def handle(self, seen: Observation) -> list[Action]:
        before = self.state.phase
        self.state, actions = step(self.state, seen)
        if self.state.phase is not before:
            log.info("state %s -> %s", before.value, self.state.phase.value)
            self._export()
        return actions

    def _export(self) -> None:
        for phase in Phase:
            self.metrics.state.labels(self.metrics.flow, phase.value).set(1 if phase is self.state.phase else 0)
