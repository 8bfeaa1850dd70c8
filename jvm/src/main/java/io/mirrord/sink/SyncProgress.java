package io.mirrord.sink;

import java.util.concurrent.TimeUnit;

/** An offset-sync writer's syncs that are done (acknowledged, failed, or left out of a batch), for a flush to await. */
final class SyncProgress {
    private long finished;

    synchronized void finished(long count) {
        if (count > 0) {
            finished += count;
            notifyAll();
        }
    }

    /** Waits until {@code target} syncs are done; false if {@code deadline} ({@link System#nanoTime()}) came first. */
    synchronized boolean await(long target, long deadline) {
        try {
            while (finished < target) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                TimeUnit.NANOSECONDS.timedWait(this, left);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
        return true;
    }
}
