package io.mirrord.sink;

import java.util.function.LongSupplier;

/**
 * When a stream's open transaction is due to commit (docs/decisions.md §12). A commit stops the stream's sends while
 * the producer drains and the coordinator answers: tens of milliseconds in a backlog or against a loaded target,
 * which with a transaction every 100 ms was a quarter of a backfill's time. A transaction that spent a quarter of
 * its time or more waiting for records, in waits of {@value #PAUSE_MS} ms or more (the stream keeps up: the source's
 * fetch waits up to 10 ms for data), is due at {@code transaction.interval.ms}, the longest a read_committed
 * consumer waits for a record beyond its copy. Any other is a backlog's (a backlog's thread, descheduled now and then
 * on a busy host, waits less than that): due once it is {@value #SHARE} times as old as the stream's last commit took,
 * if that is more than the interval, up to {@value #STRETCH} intervals; commits then take about a tenth of the
 * stream's time. Used under its transactions' monitor only.
 */
final class CommitPace {
    static final int SHARE = 10;
    static final int STRETCH = 10;
    static final long PAUSE_MS = 5;
    private final long intervalMs;
    private final LongSupplier clockMs;
    private long begunAt;
    private long lastSendAt;
    private long pausedMs;  // the open transaction's waits for records
    private long commitStartedAt;
    private long lastCommitMs;
    private long lastLastedMs;  // the last committed transaction's, from its begin to its commit's end

    CommitPace(long intervalMs, LongSupplier clockMs) {
        this.intervalMs = intervalMs;
        this.clockMs = clockMs;
    }

    /** A transaction begins now. */
    void begun() {
        begunAt = clockMs.getAsLong();
        pausedMs = 0;
    }

    /** The task sends a record of the open transaction now; returns now, for {@link #due}. */
    long sending() {
        long now = clockMs.getAsLong();
        pausedMs += waited(now);
        lastSendAt = now;
        return now;
    }

    /** Whether the open transaction is due (the task's check after a send, the timer's while the task waits). */
    boolean due(long now) {
        long age = now - begunAt;
        boolean keepsUp = 4 * (pausedMs + waited(now)) >= age;
        return age >= (keepsUp ? intervalMs : dueAfterMs());
    }

    private long waited(long now) {
        long gap = now - Math.max(lastSendAt, begunAt);
        return gap >= PAUSE_MS ? gap : 0;
    }

    /** A backlog's transaction: due after this many ms. */
    long dueAfterMs() {
        return Math.max(intervalMs, Math.min(SHARE * lastCommitMs, STRETCH * intervalMs));
    }

    long now() {
        return clockMs.getAsLong();
    }

    /** A commit starts now. */
    void committing() {
        commitStartedAt = clockMs.getAsLong();
    }

    /** The commit succeeded; the stream's next send pauses from now. */
    void committed() {
        lastSendAt = clockMs.getAsLong();
        lastCommitMs = Math.max(0, lastSendAt - commitStartedAt);
        lastLastedMs = Math.max(0, lastSendAt - begunAt);
    }

    /** How long the last commit took (its flush and the coordinator's answer). */
    long lastCommitMs() {
        return lastCommitMs;
    }

    /** How long the last committed transaction lasted, from its begin to its commit's end. */
    long lastLastedMs() {
        return lastLastedMs;
    }
}
