package io.mirrord.sink;

import java.util.function.LongSupplier;

/**
 * When a stream's open transaction is due to commit (docs/decisions.md §12). A commit stops the stream's sends while
 * the producer drains and the coordinator answers: tens of milliseconds in a backlog or against a loaded target,
 * which with a transaction every 100 ms was a quarter of a backfill's time. A transaction during which a quarter or
 * more of the reader's polls found the source dry (no more records ready, {@code io.mirrord.source.Handed}: the
 * stream keeps up with it) is due at {@code transaction.interval.ms}, the longest a read_committed consumer waits for
 * a record beyond its copy.
 * Any other is a backlog's: due once it is {@value #SHARE} times as old as the stream's last commit took, if that is
 * more than the interval, up to {@value #STRETCH} intervals. What a transaction costs is more than its commit (the
 * batches its drain sends short, the next transaction's partitions joined once the coordinator has written its
 * markers: the producer waits 20 ms each time it asks too soon): at ten commit-times exactly once copied 0.70x at
 * least once's rate, at thirty 0.89x (measured, docs/decisions.md §12).
 * The reader's polls, not the task's pauses between records, tell the two apart: a backlog's thread, descheduled
 * now and then on a busy host, pauses too (measured: a 5 M record backfill, counted by its pauses of 5 ms or more,
 * kept up in nearly every transaction). Used under its transactions' monitor only.
 */
final class CommitPace {
    static final int SHARE = 30;
    static final int STRETCH = 10;
    private final long intervalMs;
    private final LongSupplier clockMs;
    private LongSupplier polls = () -> 0;  // the task thread's reader's polls, and those that found the source dry
    private LongSupplier dryPolls = () -> 0;
    private long begunAt;
    private long pollsAtBegin;
    private long dryAtBegin;
    private long commitStartedAt;
    private long lastCommitMs;
    private long lastLastedMs;  // the last committed transaction's, from its begin to its commit's end

    CommitPace(long intervalMs, LongSupplier clockMs) {
        this.intervalMs = intervalMs;
        this.clockMs = clockMs;
    }

    /** The reader whose records the stream's task sends (its thread's, {@code io.mirrord.source.Handed}). */
    void reading(LongSupplier polls, LongSupplier dryPolls) {
        this.polls = polls;
        this.dryPolls = dryPolls;
    }

    /** A transaction begins now. */
    void begun() {
        begunAt = clockMs.getAsLong();
        pollsAtBegin = polls.getAsLong();
        dryAtBegin = dryPolls.getAsLong();
    }

    /** Whether the open transaction is due (the task's check after a send, the timer's while the task waits). */
    boolean due(long now) {
        long age = now - begunAt;
        long polled = polls.getAsLong() - pollsAtBegin;
        boolean keepsUp = polled > 0 && 4 * (dryPolls.getAsLong() - dryAtBegin) >= polled;
        return age >= (keepsUp ? intervalMs : dueAfterMs());
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

    /** The commit succeeded. */
    void committed() {
        long now = clockMs.getAsLong();
        lastCommitMs = Math.max(0, now - commitStartedAt);
        lastLastedMs = Math.max(0, now - begunAt);
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
