package io.mirrord.query;

import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;

import org.apache.spark.sql.streaming.StreamingQuery;
import org.apache.spark.sql.streaming.StreamingQueryProgress;

/**
 * Stops a streaming query between two micro-batches, so that a reload or a stop copies nothing twice.
 *
 * <p>{@code StreamingQuery.stop()} interrupts the batch in flight; what that batch already wrote is
 * written again when the query restarts from its checkpoint. Spark has no "stop after this batch", and
 * between back-to-back batches the query is idle for microseconds only, which a poll from Python
 * cannot see. This waits in the driver's JVM, checking every 0.1 ms, for the moment the query is idle
 * or a batch has just reported its progress (it committed), and stops it then: the next batch is at
 * most planning its offsets, and has sent nothing.
 */
public final class QueryStopper {
    private static final long POLL_NANOS = 100_000L;

    private QueryStopper() {
    }

    /**
     * Stops {@code query} between batches, waiting up to {@code timeoutMs} for the batch in flight to
     * finish; after that it stops it anyway. Returns whether the stop came between batches.
     */
    public static boolean stopBetweenBatches(StreamingQuery query, long timeoutMs) throws TimeoutException {
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        StreamingQueryProgress seen = query.lastProgress();
        boolean between = false;
        while (query.isActive()) {
            if (!query.status().isTriggerActive() || query.lastProgress() != seen) {
                between = true;
                break;
            }
            if (System.nanoTime() - deadline > 0) {
                break;
            }
            LockSupport.parkNanos(POLL_NANOS);
        }
        query.stop();
        return between;
    }
}
