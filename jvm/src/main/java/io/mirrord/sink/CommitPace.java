package io.mirrord.sink;

import java.util.function.LongSupplier;

/**
 * When a stream's open transaction is due to commit (docs/decisions.md §12): once it is {@code transaction.interval.ms}
 * old, or, if the stream's last commit took more than a tenth of that, once it is {@value #SHARE} times as old as that
 * commit took, up to {@value #STRETCH} intervals. A commit stops the stream's sends while the producer drains and the
 * coordinator answers (tens of milliseconds in a backlog or against a loaded target); with a transaction every 100 ms
 * that was a quarter of a backfill's time. The stretch keeps commits to about a tenth of the stream's time, so that
 * exactly once copies near at least once's rate, and a stream that keeps up on a quick target still commits every
 * interval.
 */
final class CommitPace {
    static final int SHARE = 10;
    static final int STRETCH = 10;
    private final long intervalMs;
    private final LongSupplier clockMs;
    private long begunAt;
    private long lastCommitMs;

    CommitPace(long intervalMs, LongSupplier clockMs) {
        this.intervalMs = intervalMs;
        this.clockMs = clockMs;
    }

    /** A transaction begins now. */
    void begun() {
        begunAt = clockMs.getAsLong();
    }

    /** Whether the transaction begun last is due. */
    boolean due() {
        return clockMs.getAsLong() - begunAt >= dueAfterMs();
    }

    long dueAfterMs() {
        return Math.max(intervalMs, Math.min(SHARE * lastCommitMs, STRETCH * intervalMs));
    }

    /** Now, for {@link #committed}: a commit starts. */
    long now() {
        return clockMs.getAsLong();
    }

    /** A commit that started at {@code startedAt} succeeded. */
    void committed(long startedAt) {
        lastCommitMs = Math.max(0, clockMs.getAsLong() - startedAt);
    }
}
