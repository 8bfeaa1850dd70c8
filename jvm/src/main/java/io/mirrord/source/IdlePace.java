package io.mirrord.source;

import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.errors.InterruptException;

/**
 * How often a stream with nothing to read asks the source (docs/decisions.md §9, "An idle stream rests between
 * fetches" and "An idle stream waits on a fetch the broker holds"). mirrord's source fetches with {@code
 * fetch.max.wait.ms} 10 unless consumer.properties says otherwise, and the consumer asks again as soon as a fetch comes
 * back empty: a stream whose partitions receive nothing sent each of their brokers a hundred fetches a second. Once a
 * stream's polls have found nothing for {@value #BELL_IDLE_AFTER_MS} ms it rests: it waits on its {@link Doorbell},
 * whose fetches the broker holds until a record comes, and polls again when that rings (a stream of a record every few
 * seconds, heartbeats, rests between them). Without a bell (one that cannot be started, or none given) a stream rests
 * after {@value #IDLE_AFTER_MS} ms: a resting poll waits for one fetch only and the stream then sleeps, so that it asks
 * about once per {@value #GAP_MS} ms; its first record after a quiet second then waits up to that long more. Polls that
 * find records keep the pace as before. Where {@code fetch.max.wait.ms} is {@value #LONG_WAIT_MS} ms or more, the broker
 * holds each fetch itself (until its {@code fetch.min.bytes}) and the stream never rests. Used by the stream's task
 * thread only.
 */
final class IdlePace {
    static final long IDLE_AFTER_MS = 1_000;
    static final long BELL_IDLE_AFTER_MS = 100;
    static final long GAP_MS = 100;
    static final long LONG_WAIT_MS = 50;
    private static final long ROUND_TRIP_MS = 5;  // a poll while resting: the broker's wait and the way back
    private final long probeMs;  // a resting poll's longest wait; 0: never rests
    private final Doorbell bell;  // what a resting stream waits on; null: it sleeps between its own polls
    private long emptySince = -1;  // when the polls that found nothing began (-1: the last found records)

    IdlePace(long fetchMaxWaitMs) {
        this(fetchMaxWaitMs, null);
    }

    IdlePace(long fetchMaxWaitMs, Doorbell bell) {
        this.probeMs = fetchMaxWaitMs < LONG_WAIT_MS ? Math.max(0, fetchMaxWaitMs) + ROUND_TRIP_MS : 0;
        this.bell = bell;
    }

    /**
     * A resting stream waits up to {@code timeoutMs} on its bell instead of polling {@code stream}: true if it did
     * (the next poll is a full one if the bell rang), false if the stream is not resting or has no bell to wait on.
     */
    boolean waitedOnBell(Consumer<byte[], byte[]> stream, long now, long timeoutMs) {
        if (bell == null || !resting(now)) {
            return false;
        }
        switch (bell.await(stream, timeoutMs)) {
            case YES:
                emptySince = -1;
                return true;
            case NO:
                return true;
            default:
                return false;
        }
    }

    /** The longest the poll starting {@code now} may wait, at most {@code timeoutMs}. */
    long pollMs(long now, long timeoutMs) {
        if (probeMs == 0) {
            return timeoutMs;
        }
        return Math.min(timeoutMs, resting(now) ? probeMs : idleAfterMs());
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
        return probeMs > 0 && emptySince >= 0 && now - emptySince >= idleAfterMs();
    }

    /** How long a stream's polls find nothing before it rests: a bell wakes it at its next record, a sleep may not. */
    private long idleAfterMs() {
        return bell != null && bell.usable() ? BELL_IDLE_AFTER_MS : IDLE_AFTER_MS;
    }

    void close() {
        if (bell != null) {
            bell.close();
        }
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
