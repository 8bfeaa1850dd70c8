package io.mirrord.source;

import org.apache.kafka.common.errors.InterruptException;

/**
 * How often a stream with nothing to read asks the source (docs/decisions.md §9, "An idle stream rests between
 * fetches"). mirrord's source fetches with {@code fetch.max.wait.ms} 10 unless consumer.properties says otherwise, and
 * the consumer asks again as soon as a fetch comes back empty: a stream whose partitions receive nothing sent each of
 * their brokers a hundred fetches a second. Once a stream's polls have found nothing for {@value #IDLE_AFTER_MS} ms, a
 * poll waits for one fetch only and the stream then rests, so that it asks about once per {@value #GAP_MS} ms; its
 * first record after a quiet second waits up to that long more. Polls that find records keep the pace as before.
 * Where {@code fetch.max.wait.ms} is {@value #LONG_WAIT_MS} ms or more, the broker holds each fetch itself (until its
 * {@code fetch.min.bytes}) and the stream never rests. Used by the stream's task thread only.
 */
final class IdlePace {
    static final long IDLE_AFTER_MS = 1_000;
    static final long GAP_MS = 100;
    static final long LONG_WAIT_MS = 50;
    private static final long ROUND_TRIP_MS = 5;  // a poll while resting: the broker's wait and the way back
    private final long probeMs;  // a resting poll's longest wait; 0: never rests
    private long emptySince = -1;  // when the polls that found nothing began (-1: the last found records)

    IdlePace(long fetchMaxWaitMs) {
        this.probeMs = fetchMaxWaitMs < LONG_WAIT_MS ? Math.max(0, fetchMaxWaitMs) + ROUND_TRIP_MS : 0;
    }

    /** The longest the poll starting {@code now} may wait, at most {@code timeoutMs}. */
    long pollMs(long now, long timeoutMs) {
        if (probeMs == 0) {
            return timeoutMs;
        }
        return Math.min(timeoutMs, resting(now) ? probeMs : IDLE_AFTER_MS);
    }

    /**
     * The poll that started at {@code startedAt} returned, with records or none; the rest before the next poll, at
     * most {@code leftMs} (the time left of the caller's wait).
     */
    long polled(long startedAt, boolean found, long now, long leftMs) {
        if (found) {
            emptySince = -1;
            return 0;
        }
        if (emptySince < 0) {
            emptySince = startedAt;
        }
        return resting(now) ? Math.max(0, Math.min(leftMs, GAP_MS - (now - startedAt))) : 0;
    }

    private boolean resting(long now) {
        return probeMs > 0 && emptySince >= 0 && now - emptySince >= IDLE_AFTER_MS;
    }

    /** Sleeps {@code ms} (nothing if 0); an interrupt (the query stopping) ends it as Kafka's clients' do. */
    static void sleep(long ms) {
        if (ms <= 0) {
            return;
        }
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptException(e);
        }
    }
}
