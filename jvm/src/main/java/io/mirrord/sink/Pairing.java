package io.mirrord.sink;

import io.mirrord.metrics.Stats;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * The source offsets of one target partition's records in flight, in send order, and its tally; both guarded
 * by the tally's monitor, the one lock a record takes in {@code onSend} and in {@code onAcknowledgement}.
 * Kafka acknowledges a partition's records in the order they were sent, exactly once each, so each
 * acknowledgement pops the source offset of the record it stands for.
 *
 * <p>A failed record stops the source partition's position (docs/decisions.md §10): no later acknowledgement
 * moves it, also of records the task sent before it saw the failure, until a record at or below the failed
 * one is sent (the query restarted from it) or one read in a later incarnation. Records still in flight
 * then were sent before that and count for nothing. The offset syncs stop for less: a failure ends the
 * partition's run and no sync is written until what was in flight is through ({@code broken}).
 */
final class Pairing {
    final String target;
    final Stats.Tally tally;
    private final SyncRuns state;  // null: no offset syncs
    private final AtomicLong incarnation;  // the source partition's, as its reader set it (docs/decisions.md §10)
    private long[] inFlight = new long[64];  // a ring: head is the oldest
    private long[] incarnations = new long[64];  // the incarnation each record in flight was read in
    private int head;
    private int size;
    private boolean broken;  // no syncs until nothing is in flight
    private boolean stopped;  // a record failed: the position moves no more until the query sends it again
    private long stoppedAt;  // the lowest source offset that failed
    private long stoppedIn;  // the incarnation it was read in
    private int stale;  // the oldest records in flight, sent before the query sent from stoppedAt again

    Pairing(String target, Stats.Tally tally, SyncRuns state, AtomicLong incarnation) {
        this.target = target;
        this.tally = tally;
        this.state = state;
        this.incarnation = incarnation;
    }

    int inFlight() {
        synchronized (tally) {
            return size;
        }
    }

    void sent(long sourceOffset, long bytes) {
        long readIn = incarnation.get();
        synchronized (tally) {
            if (stopped && (sourceOffset >= 0 && sourceOffset <= stoppedAt || readIn > stoppedIn)) {
                stopped = false;
                stale = size;
            }
            if (size == inFlight.length) {
                grow();
            }
            inFlight[(head + size) % inFlight.length] = sourceOffset;
            incarnations[(head + size) % inFlight.length] = readIn;
            size++;
            tally.sent(bytes);
        }
    }

    private void grow() {
        long[] grown = new long[size * 2];
        long[] grownIncarnations = new long[size * 2];
        for (int i = 0; i < size; i++) {
            grown[i] = inFlight[(head + i) % size];
            grownIncarnations[i] = incarnations[(head + i) % size];
        }
        inFlight = grown;
        incarnations = grownIncarnations;
        head = 0;
    }

    /** {@code latencyMs}: since the record's timestamp, {@link Stats#NO_LATENCY} if unknown or failed. */
    void acknowledged(RecordMetadata metadata, Exception exception, long latencyMs, OffsetSyncWriter writer) {
        synchronized (tally) {
            if (exception == null) {
                tally.acknowledged(latencyMs);
            }
            if (size == 0) {
                return;  // a record sent without a partition
            }
            long upstream = inFlight[head];
            long readIn = incarnations[head];
            head = (head + 1) % inFlight.length;
            size--;
            boolean current = stale == 0;  // sent since the query last sent from a failed record
            stale = Math.max(0, stale - 1);
            if (exception != null) {
                broken = true;
                if (writer != null) {
                    writer.reset(state);
                }
                if (current) {
                    stop(upstream, readIn);
                }
            } else {
                if (current && !stopped && upstream >= 0) {
                    tally.advance(readIn, upstream + 1);
                }
                if (writer != null && !broken) {
                    if (upstream >= 0 && metadata.hasOffset()) {
                        writer.acked(state, upstream, metadata.offset());
                    } else {
                        writer.reset(state);  // an offset unknown (acks=0, or no source offset): the run ends here
                    }
                }
            }
            if (size == 0) {
                broken = false;
            }
        }
    }

    private void stop(long sourceOffset, long readIn) {
        if (!stopped || sourceOffset < stoppedAt) {
            stoppedAt = sourceOffset;
            stoppedIn = readIn;
        }
        stopped = true;
    }
}
