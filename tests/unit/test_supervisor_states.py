"""Every transition of the supervisor's state machine (docs/decisions.md §11), without brokers or Spark:
each test gives a state and an observation and asserts the next state and the actions, in order."""

from __future__ import annotations

import logging
from dataclasses import replace
from types import SimpleNamespace

import pytest

from mirrord.errors import ConfigError, Fenced, MirrordError, NotConfirmed
from mirrord.metrics import Metrics
from mirrord.supervisor.states import (
    QUICK_RESTART,
    RESTART_BACKOFF,
    STABLE_FOR,
    STANDBY_AFTER,
    START_ATTEMPTS,
    CountError,
    Do,
    Elected,
    Exit,
    HandOver,
    JvmExited,
    Log,
    Machine,
    Phase,
    QueryFailed,
    Reload,
    Restart,
    Started,
    StartFailed,
    State,
    Stop,
    Turn,
    step,
)
from mirrord.supervisor.status import status_line
from mirrord.supervisor.watchdog import Watchdog

NOW = 1000.0
AWAY = ("target cluster (kafka-b:9092) unreachable since 10:42:17 (2m30s)",)
WHY = "org.apache.kafka.common.errors.TimeoutException: Expiring 3 record(s)"
NOT_RUNNING = (Phase.STARTING, Phase.WAITING, Phase.STANDBY, Phase.RETRYING)
FINAL = (Phase.STOPPING, Phase.FENCED, Phase.FAILED)
MIRRORING = State(Phase.MIRRORING, ready=True, announced=True)


def test_the_first_state_is_starting_with_nothing_sent():
    assert State() == State(Phase.STARTING, ready=False, announced=False, retry_at=0.0, start_failures=0)


# -- signals and Spark's JVM, whatever the state --------------------------------------------------
@pytest.mark.parametrize("phase", [*NOT_RUNNING, Phase.MIRRORING, Phase.OUTAGE])
def test_a_stop_stops(phase):
    state = State(phase, ready=True)
    assert step(state, Stop()) == (State(Phase.STOPPING, ready=True), [Do.SHUTDOWN])


@pytest.mark.parametrize("phase", [*NOT_RUNNING, Phase.MIRRORING, Phase.OUTAGE])
def test_a_reload_is_carried_out_in_any_state_and_changes_none(phase):
    state = State(phase, ready=True, retry_at=NOW + 3)
    assert step(state, Reload()) == (state, [Do.RELOAD])


@pytest.mark.parametrize("phase", [*NOT_RUNNING, Phase.MIRRORING, Phase.OUTAGE])
def test_a_jvm_that_fenced_itself_exits_75_first_thing_in_a_turn(phase):
    assert step(State(phase), Turn(NOW, AWAY, active=False, jvm_exit=75)) == (State(Phase.FENCED), [Exit(Fenced(
        "this host's lease lapsed while its supervisor was not answering: Spark's JVM fenced itself; "
        "restart as a standby"))])


@pytest.mark.parametrize("observation", [Turn(NOW, jvm_exit=137), JvmExited(137)])
def test_a_jvm_that_exited_otherwise_fails(observation):
    assert step(MIRRORING, observation) == (replace_phase(MIRRORING, Phase.FAILED), [
        Exit(MirrordError("Spark's JVM exited with status 137"))])


@pytest.mark.parametrize(("status", "said"), [
    (-9, "Spark's JVM was killed by SIGKILL (the kernel's out-of-memory killer sends it: see `journalctl -k`)"),
    (-6, "Spark's JVM was killed by SIGABRT"), (-77, "Spark's JVM was killed by signal 77")])
def test_a_jvm_killed_by_a_signal_is_named_by_it(status, said):
    """Python's exit status of a process a signal killed is the signal's number, negative: "status -9" told an
    operator nothing."""
    assert step(MIRRORING, JvmExited(status)) == (replace_phase(MIRRORING, Phase.FAILED), [
        Exit(MirrordError(said))])


def test_a_jvm_that_does_not_answer_but_runs_changes_nothing():
    assert step(MIRRORING, JvmExited(None)) == (MIRRORING, [])
    assert step(MIRRORING, JvmExited(75))[0].phase is Phase.FENCED


@pytest.mark.parametrize("phase", FINAL)
@pytest.mark.parametrize("observation", [Stop(), Reload(), Turn(NOW), Turn(NOW, jvm_exit=1), Started(),
                                         HandOver(True), QueryFailed(NOW, "query", WHY)])
def test_nothing_leaves_a_final_state(phase, observation):
    assert step(State(phase), observation) == (State(phase), [])


def test_an_unknown_observation_is_a_bug():
    with pytest.raises(TypeError):
        step(State(), object())


# -- no query: waiting, retrying, asking the election ---------------------------------------------
def test_a_cluster_away_at_start_up_sends_ready_at_once_with_a_waiting_line():
    assert step(State(), Turn(NOW, AWAY)) == (State(Phase.WAITING, ready=True), [
        Log(logging.WARNING, f"waiting: {AWAY[0]}"), Do.READY])


def test_waiting_again_sends_nothing_more():
    for phase in NOT_RUNNING:
        assert step(State(phase, ready=True), Turn(NOW, AWAY)) == (State(Phase.WAITING, ready=True), [])


def test_two_clusters_away_are_named_in_one_line():
    two = ("source cluster (a:9092) unreachable since 1", "target cluster (b:9092) unreachable since 2")
    assert step(State(), Turn(NOW, two))[1][0] == Log(logging.WARNING, f"waiting: {two[0]}; {two[1]}")


@pytest.mark.parametrize("phase", NOT_RUNNING)
def test_before_the_retry_time_nothing_is_asked(phase):
    state = State(phase, ready=True, retry_at=NOW + 0.1)
    assert step(state, Turn(NOW)) == (replace_phase(state, Phase.RETRYING), [])


@pytest.mark.parametrize("phase", NOT_RUNNING)
def test_once_both_clusters_answer_and_the_retry_time_passed_the_election_is_asked(phase):
    state = State(phase, retry_at=NOW)
    assert step(state, Turn(NOW)) == (state, [Do.ASK_ELECTION])


def test_the_election_is_asked_whatever_its_last_answer_said():
    """`active` is the query's business: a host without one asks the election itself."""
    assert step(State(Phase.STANDBY, ready=True), Turn(NOW, active=False))[1] == [Do.ASK_ELECTION]


def test_an_election_that_cannot_be_joined_is_retried_after_the_backoff():
    answer = Elected(NOW, False, error="cannot create topic mirrord-leader.g.internal: not authorized")
    assert step(State(), answer) == (State(Phase.RETRYING, retry_at=NOW + RESTART_BACKOFF), [
        Log(logging.WARNING, "cannot create topic mirrord-leader.g.internal: not authorized; retrying in 5s")])


@pytest.mark.parametrize("phase", NOT_RUNNING)
def test_elected_starts_the_query(phase):
    assert step(State(phase, ready=True), Elected(NOW, True)) == (State(Phase.STARTING, ready=True), [Do.START])


def test_not_elected_just_after_joining_waits_for_the_assignment():
    assert step(State(), Elected(NOW, False, joined_at=NOW - STANDBY_AFTER)) == (State(Phase.STARTING), [])


def test_not_elected_for_longer_stands_by_sends_ready_once_and_rehearses_the_query_once():
    answer = Elected(NOW, False, joined_at=NOW - STANDBY_AFTER - 0.1)
    state, actions = step(State(), answer)
    assert (state, actions) == (State(Phase.STANDBY, ready=True), [Do.STANDING_BY, Do.READY, Do.REHEARSE])
    assert step(state, answer) == (state, [])


def test_a_host_rejoining_after_its_session_lapsed_in_an_outage_waits_its_patience_before_standing_by():
    """A coordinator that restarted keeps the lapsed member until its session ends: not another host's flow."""
    rejoining = Elected(NOW, False, joined_at=NOW - STANDBY_AFTER - 3, patience=STANDBY_AFTER + 10)
    assert step(State(Phase.WAITING, ready=True), rejoining) == (State(Phase.STARTING, ready=True), [])


def test_not_elected_after_waiting_at_start_up_stands_by_without_a_second_ready():
    answer = Elected(NOW, False, joined_at=NOW - 60)
    assert step(State(Phase.WAITING, ready=True), answer) == (State(Phase.STANDBY, ready=True), [Do.REHEARSE])


# -- the start ------------------------------------------------------------------------------------
def test_the_first_start_says_what_it_mirrors_and_sends_ready():
    assert step(State(Phase.STARTING, start_failures=3), Started()) == (MIRRORING, [Do.ANNOUNCE, Do.READY])


def test_a_start_after_ready_was_sent_waiting_says_what_it_mirrors_only():
    assert step(State(Phase.STARTING, ready=True), Started()) == (MIRRORING, [Do.ANNOUNCE])


def test_a_later_start_says_nothing_and_resets_the_failures():
    assert step(State(Phase.STARTING, ready=True, announced=True, start_failures=4), Started()) == (MIRRORING, [])


@pytest.mark.parametrize("error, phase", [(ConfigError("producer.properties", "acks", "invalid"), Phase.FAILED),
                                          (Fenced("this host's lease lapsed: fenced; restart as a standby"),
                                           Phase.FENCED)])
def test_a_start_refused_by_the_configuration_or_the_lease_exits_with_that_error(error, phase):
    state, actions = step(State(Phase.STARTING), StartFailed(NOW, error, str(error), up_for=1e6))
    assert (state, actions) == (State(phase), [Exit(error)])
    assert actions[0].error is error  # its exit status too: 78 or 75


def test_a_failed_start_is_counted_and_retried_after_the_backoff():
    failed = StartFailed(NOW, RuntimeError("Timed out waiting for a node assignment"),
                         "Timed out waiting for a node assignment", up_for=1e6)
    assert step(State(Phase.STARTING, start_failures=START_ATTEMPTS - 2), failed) == (
        State(Phase.RETRYING, retry_at=NOW + RESTART_BACKOFF, start_failures=START_ATTEMPTS - 1), [
            CountError("query"),
            Log(logging.WARNING, "cannot start the streaming query, retrying in 5s: "
                "Timed out waiting for a node assignment")])


def test_the_last_failed_start_while_both_clusters_answered_all_along_fails():
    failed = StartFailed(NOW, RuntimeError("boom"), "boom", up_for=START_ATTEMPTS * RESTART_BACKOFF + 0.1)
    assert step(State(Phase.STARTING, start_failures=START_ATTEMPTS - 1), failed) == (
        State(Phase.FAILED, start_failures=START_ATTEMPTS), [
            CountError("query"), Exit(MirrordError("cannot start the streaming query: boom"))])


def test_a_hold_not_confirmed_yet_is_waited_out_and_never_counts_towards_giving_up():
    error = NotConfirmed("this host's hold on the flow is not confirmed now")
    failed = StartFailed(NOW, error, str(error), up_for=1e6)
    assert step(State(Phase.STARTING, start_failures=START_ATTEMPTS - 1), failed) == (
        State(Phase.RETRYING, retry_at=NOW + RESTART_BACKOFF, start_failures=START_ATTEMPTS - 1), [
            Log(logging.WARNING, f"not starting yet, retrying in 5s: {error}")])


def test_failed_starts_go_on_while_the_clusters_have_not_answered_long():
    failed = StartFailed(NOW, RuntimeError("boom"), "boom", up_for=START_ATTEMPTS * RESTART_BACKOFF)
    state, _ = step(State(Phase.STARTING, start_failures=START_ATTEMPTS + 3), failed)
    assert state == State(Phase.RETRYING, retry_at=NOW + RESTART_BACKOFF, start_failures=START_ATTEMPTS + 4)


# -- the query runs -------------------------------------------------------------------------------
@pytest.mark.parametrize("phase", [Phase.MIRRORING, Phase.OUTAGE])
def test_while_both_clusters_answer_it_is_mirroring_and_the_query_is_asked(phase):
    state = replace_phase(MIRRORING, phase)
    assert step(state, Turn(NOW)) == (MIRRORING, [Do.ASK_FAILURE])


@pytest.mark.parametrize("phase", [Phase.MIRRORING, Phase.OUTAGE])
def test_while_a_cluster_is_away_it_is_an_outage_and_the_query_is_asked(phase):
    state = replace_phase(MIRRORING, phase)
    assert step(state, Turn(NOW, AWAY)) == (replace_phase(MIRRORING, Phase.OUTAGE), [Do.ASK_FAILURE])


@pytest.mark.parametrize("away", [(), AWAY])
def test_a_lapsed_election_while_mirroring_is_an_outage_until_another_host_holds_the_flow(away):
    assert step(MIRRORING, Turn(NOW, away, active=False)) == (replace_phase(MIRRORING, Phase.OUTAGE),
                                                              [Do.ASK_HAND_OVER])


def test_no_other_holder_is_an_outage_not_a_hand_over():
    outage = replace_phase(MIRRORING, Phase.OUTAGE)
    assert step(outage, HandOver(False)) == (outage, [])


def test_another_holder_fences_this_host():
    assert step(replace_phase(MIRRORING, Phase.OUTAGE), HandOver(True)) == (replace_phase(MIRRORING, Phase.FENCED), [
        Do.FENCE, Exit(Fenced("lost the flow's election while mirroring: fenced; restart as a standby"))])


def test_records_deleted_before_they_were_read_restart_the_query_at_the_next_turn():
    failed = QueryFailed(NOW, "deleted", "OffsetOutOfRangeException: t-0 at 12", recent_outage=True)
    state, actions = step(MIRRORING, failed)
    assert (state, actions) == (State(Phase.RETRYING, ready=True, announced=True, failed_at=NOW, retry_at=NOW), [
        Do.FORGET, CountError("deleted"), Log(logging.WARNING, "the source deleted records before mirrord read "
                                              "them; restarting past them: OffsetOutOfRangeException: t-0 at 12")])
    assert step(state, Turn(NOW + 0.5)) == (state, [Do.ASK_ELECTION])


OUTAGE_LINE = ("the streaming query stopped while a cluster was unreachable; it restarts from its checkpoint when "
               f"both answer: {WHY}")


@pytest.mark.parametrize("kind", ["delivery", "query"])
@pytest.mark.parametrize("abort", [False, True])
@pytest.mark.parametrize("recent", [False, True])  # a cluster away now counts whatever the probe's memory says
def test_a_query_that_fails_while_a_cluster_is_away_waits_for_it(kind, abort, recent):
    failed = QueryFailed(NOW, kind, WHY, away=True, recent_outage=recent, abort_on_send_failure=abort)
    assert step(replace_phase(MIRRORING, Phase.OUTAGE), failed) == (
        State(Phase.WAITING, ready=True, announced=True, failed_at=NOW, retry_at=NOW + RESTART_BACKOFF),
        [Do.FORGET, CountError(kind), Log(logging.WARNING, OUTAGE_LINE)])


@pytest.mark.parametrize("kind", ["delivery", "query"])
def test_a_query_that_fails_within_the_outage_memory_restarts_after_the_backoff(kind):
    failed = QueryFailed(NOW, kind, WHY, recent_outage=True, abort_on_send_failure=True)
    assert step(MIRRORING, failed) == (
        State(Phase.RETRYING, ready=True, announced=True, failed_at=NOW, retry_at=NOW + RESTART_BACKOFF),
        [Do.FORGET, CountError(kind), Log(logging.WARNING, OUTAGE_LINE)])


def test_a_delivery_failure_while_both_answer_is_retried_unless_abort_on_send_failure():
    assert step(MIRRORING, QueryFailed(NOW, "delivery", WHY)) == (
        State(Phase.RETRYING, ready=True, announced=True, failed_at=NOW, retry_at=NOW + QUICK_RESTART),
        [Do.FORGET, CountError("delivery"),
         Log(logging.ERROR, f"batch failed, retrying from the last committed batch in 0.5s: {WHY}")])
    assert step(MIRRORING, QueryFailed(NOW, "delivery", WHY, abort_on_send_failure=True)) == (
        replace(MIRRORING, phase=Phase.FAILED, failed_at=NOW),
        [Do.FORGET, CountError("delivery"), Exit(MirrordError(f"streaming query failed: {WHY}"))])


@pytest.mark.parametrize("kind", ["delivery", "timeout", "transaction"])
def test_a_repairable_failure_restarts_quickly_once_a_minute_at_most(kind):
    # a loaded target that answered late: the first restart after a minute without a failure is quick, the next
    # within the minute waits the backoff, so a failure that keeps coming does not restart the query twice a second
    state, _ = step(MIRRORING, QueryFailed(NOW, kind, WHY))
    assert state.retry_at == NOW + QUICK_RESTART
    state, _ = step(replace(state, phase=Phase.MIRRORING), QueryFailed(NOW + STABLE_FOR - 1, kind, WHY))
    assert state.retry_at == NOW + STABLE_FOR - 1 + RESTART_BACKOFF
    state, _ = step(replace(state, phase=Phase.MIRRORING), QueryFailed(NOW + 2 * STABLE_FOR, kind, WHY))
    assert state.retry_at == NOW + 2 * STABLE_FOR + QUICK_RESTART


@pytest.mark.parametrize("kind", ["timeout", "lapsed"])
@pytest.mark.parametrize("abort", [False, True])
def test_a_client_timeout_or_a_lapsed_lease_while_both_answer_is_an_outage_not_a_refused_send(kind, abort):
    # A broker's restart outlasts the lease-bounded timeouts, and a lapsed lease refuses sends, before the probe
    # sees the cluster away. A lapsed lease is granted again only after its quarantine: the start waits for it.
    failed = QueryFailed(NOW, kind, WHY, abort_on_send_failure=abort, quarantined_for=2.4)
    backoff = QUICK_RESTART if kind == "timeout" else 2.4
    assert step(MIRRORING, failed) == (
        State(Phase.RETRYING, ready=True, announced=True, failed_at=NOW, retry_at=NOW + backoff),
        [Do.FORGET, CountError(kind), Log(logging.WARNING, OUTAGE_LINE)])


@pytest.mark.parametrize(("quarantined_for", "backoff"), [(0.0, QUICK_RESTART), (1.5, 1.5), (9.0, RESTART_BACKOFF)])
def test_a_lapsed_lease_noticed_after_the_outage_restarts_once_its_quarantine_is_over(quarantined_for, backoff):
    # The send was refused while the target was away and the failure seen only once it answered again: the lease
    # lapsed a session ago or more, its quarantine is over, and the start goes on at once (the election decides
    # whether this host holds the flow). The outage's 5 s backoff here cost a test's bound of 5 s to copy again.
    failed = QueryFailed(NOW, "lapsed", WHY, recent_outage=True, quarantined_for=quarantined_for)
    assert step(MIRRORING, failed) == (
        State(Phase.RETRYING, ready=True, announced=True, failed_at=NOW, retry_at=NOW + backoff),
        [Do.FORGET, CountError("lapsed"), Log(logging.WARNING, OUTAGE_LINE)])


def test_records_expired_while_both_answer_name_the_session_that_gives_them_more_time():
    # 2,000 partitions on a loaded target: batches waited past election's 3 s while both clusters answered
    why = ("org.apache.kafka.common.errors.TimeoutException: Expiring 56 record(s) for lat-1738:3028 ms has passed "
           "since batch creation")
    assert step(MIRRORING, QueryFailed(NOW, "timeout", why)) == (
        State(Phase.RETRYING, ready=True, announced=True, failed_at=NOW, retry_at=NOW + QUICK_RESTART),
        [Do.FORGET, CountError("timeout"), Log(logging.WARNING, (
            "records expired in the producer before the target acknowledged them, while the last probe saw both "
            "clusters answer; the query restarts from the acknowledged positions in 0.5s (and waits if the target "
            "has gone since). Under leader election a record has 3/10 of "
            "leader.session.timeout.ms to be acknowledged: if this recurs, the target is too slow for the flow's "
            f"partitions in that time, and a longer session gives them more (docs/decisions.md §6): {why}"))])
    _, said = step(MIRRORING, QueryFailed(NOW, "timeout", why, recent_outage=True))  # an outage's expiry: as before
    assert said[-1] == Log(logging.WARNING, OUTAGE_LINE.replace(WHY, why))


@pytest.mark.parametrize("abort", [False, True])
def test_an_aborted_transaction_restarts_from_the_targets_positions_whatever_abort_on_send_failure(abort):
    # exactly once: the aborted transaction's records are copied again by the next start, once
    assert step(MIRRORING, QueryFailed(NOW, "transaction", WHY, abort_on_send_failure=abort)) == (
        State(Phase.RETRYING, ready=True, announced=True, failed_at=NOW, retry_at=NOW + QUICK_RESTART),
        [Do.FORGET, CountError("transaction"), Log(logging.WARNING, (
            "a transaction could not commit and was aborted; the query restarts from the positions the target "
            f"committed in 0.5s: {WHY}"))])


@pytest.mark.parametrize("abort", [False, True])
def test_a_lost_executor_restarts_the_query_at_once_never_the_daemon(abort):
    # a cluster's executors come and go: Spark lost a task's executor more often than spark.task.maxFailures allows
    why = ("org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times, "
           "most recent failure: Lost task 0.0 in stage 1.0 (TID 1) (127.0.0.1 executor 1): ExecutorLostFailure "
           "(executor 1 exited caused by one of the running tasks) Reason: Command exited with code 137")
    assert step(MIRRORING, QueryFailed(NOW, "executor", why, abort_on_send_failure=abort)) == (
        State(Phase.RETRYING, ready=True, announced=True, failed_at=NOW, retry_at=NOW),
        [Do.FORGET, CountError("executor"), Log(logging.WARNING, (
            f"Spark lost the executor of a task; the query restarts now: {why}"))])
    state, _ = step(MIRRORING, QueryFailed(NOW, "executor", why, away=True))
    assert (state.phase, state.retry_at) == (Phase.WAITING, NOW + RESTART_BACKOFF), "an outage comes first"


def test_any_other_failure_while_both_answer_fails():
    assert step(MIRRORING, QueryFailed(NOW, "query", "java.lang.IllegalStateException: boom")) == (
        replace(MIRRORING, phase=Phase.FAILED, failed_at=NOW), [Do.FORGET, CountError("query"), Exit(MirrordError(
            "streaming query failed: java.lang.IllegalStateException: boom"))])


# -- a reload that restarts the query -------------------------------------------------------------
def test_a_reload_that_stopped_the_query_starts_it_again_at_once():
    state = State(Phase.MIRRORING, ready=True, announced=True, retry_at=NOW + 4)
    assert step(state, Restart(NOW)) == (State(Phase.STARTING, ready=True, announced=True), [Do.ASK_ELECTION])


def test_a_reload_on_a_host_without_a_query_keeps_its_state_and_asks_again_at_once():
    state = State(Phase.STANDBY, ready=True, retry_at=NOW + 4)
    assert step(state, Restart(NOW)) == (State(Phase.STANDBY, ready=True), [Do.ASK_ELECTION])


def test_a_reload_that_stopped_the_query_while_a_cluster_went_away_waits():
    assert step(MIRRORING, Restart(NOW, AWAY)) == (replace_phase(MIRRORING, Phase.WAITING), [])


# -- whole runs -----------------------------------------------------------------------------------
def run(state: State, observations: list) -> tuple[State, list]:
    done = []
    for seen in observations:
        state, actions = step(state, seen)
        done += actions
    return state, done


def test_a_run_that_waits_for_the_target_at_start_up_sends_ready_once():
    state, actions = run(State(), [Turn(NOW, AWAY), Turn(NOW + 0.5, AWAY), Turn(NOW + 1), Elected(NOW + 1, True),
                                   Started(), Turn(NOW + 1.5), Turn(NOW + 2, AWAY)])
    assert state.phase is Phase.OUTAGE
    assert actions.count(Do.READY) == 1 and actions.count(Do.ANNOUNCE) == 1 and actions.count(Do.START) == 1


def test_a_standby_that_takes_over_mirrors_and_says_so_once():
    state, actions = run(State(), [Turn(NOW), Elected(NOW, False, joined_at=NOW),
                                   Turn(NOW + 6), Elected(NOW + 6, False, joined_at=NOW),
                                   Turn(NOW + 7), Elected(NOW + 7, True), Started()])
    assert state == MIRRORING
    assert [a for a in actions if a in (Do.STANDING_BY, Do.READY, Do.ANNOUNCE)] == [
        Do.STANDING_BY, Do.READY, Do.ANNOUNCE]


# -- Machine: the state made visible --------------------------------------------------------------
def gauge(metrics: Metrics) -> dict[str, float]:
    return {p.value: metrics.registry.get_sample_value("mirrord_state", {"flow": "f", "state": p.value})
            for p in Phase}


def test_the_machine_exports_its_state_one_hot_and_logs_each_change_once(caplog):
    metrics = Metrics("f")
    machine = Machine(metrics)
    assert gauge(metrics) == {p.value: 1.0 if p is Phase.STARTING else 0.0 for p in Phase}
    caplog.set_level(logging.INFO, logger="mirrord")
    assert machine.handle(Turn(NOW, AWAY)) == [Log(logging.WARNING, f"waiting: {AWAY[0]}"), Do.READY]
    assert machine.handle(Turn(NOW + 0.5, AWAY)) == []
    assert machine.phase is Phase.WAITING
    assert gauge(metrics) == {p.value: 1.0 if p is Phase.WAITING else 0.0 for p in Phase}
    changes = [r for r in caplog.records if r.getMessage().startswith("state ")]
    assert [(r.levelno, r.getMessage()) for r in changes] == [(logging.INFO, "state starting -> waiting")]


def test_the_status_line_ends_with_the_state():
    positions = SimpleNamespace(mirrored=12, lag=3, topics=2, lost=0)
    assert status_line(positions, 5.0, None, [], None, "mirroring") == (
        "12 records mirrored, 5 records/s, lag 3 records, 2 topics; state mirroring")
    assert status_line(positions, 0.0, None, list(AWAY), None, "outage").startswith(f"waiting: {AWAY[0]}; 12 records")
    assert status_line(positions, 0.0, None, [], "another host mirrors flow f", "standby").startswith(
        "standby: another host mirrors flow f; ")


def test_a_stall_withholds_the_watchdog_and_is_said_once(caplog):
    watchdog = Watchdog(SimpleNamespace(watchdog_interval=None))
    caplog.set_level(logging.WARNING, logger="mirrord")
    assert not watchdog.stalled(None, 1000) and not watchdog.stalled(1.0, 1000)
    assert watchdog.stalled(1.5, 1000) and watchdog.stalled(2.5, 1000)
    assert len([r for r in caplog.records if "batch overdue" in r.getMessage()]) == 1
    assert watchdog.turn == 0.5
    assert Watchdog(SimpleNamespace(watchdog_interval=0.4)).turn == 0.2


def replace_phase(state: State, phase: Phase) -> State:
    return State(phase, state.ready, state.announced, state.retry_at, state.start_failures)
