package io.mirrord.sink;

import io.mirrord.metrics.Stats;
import io.mirrord.metrics.Tally;
import io.mirrord.positions.Incarnations;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * One source partition a stream writes: the names its records are sent under (the target topic, named once
 * by the replication policy, and the same partition number), its tally, its incarnation and topic id as the
 * source set them (docs/decisions.md §10), the rules of its offset syncs; and, at least once, what its
 * acknowledgements make of its position. The tally's monitor guards the fields below it: the stream's task
 * thread takes it as it sends a record, the producer's I/O thread as it acknowledges one.
 *
 * <p>The position is the acknowledged prefix: the target acknowledges a partition's records in the order they
 * were sent, so each acknowledgement moves the position past its record, unless a record failed before it. A
 * failed record stops the position for good (docs/decisions.md §10): no later acknowledgement moves it, also of
 * records the task sent before it saw the failure. The stream's sender sends nothing more once a record failed
 * ({@link StreamSends}): the task fails, and the query restarts from a checkpoint at or before the failed record
 * with a new sender. The offset syncs stop for less: a failure ends the partition's run and no sync is written
 * until what was in flight is through.
 */
final class SourcePartition {
    final TopicPartition tp;
    final String target;
    final Integer partition;  // the target partition, boxed once
    final Tally tally;
    final AtomicLong incarnation;
    final AtomicReference<String> topicId;
    final SyncRuns syncs;  // null: no offset syncs
    private long sent;  // records sent
    private long done;  // records acknowledged or failed
    private boolean stopped;  // a record failed: the position moves no more
    private boolean broken;  // no syncs until nothing is in flight

    SourcePartition(TopicPartition tp, String target, Stats stats, SyncRuns syncs) {
        this.tp = tp;
        this.target = target;
        this.partition = tp.partition();
        this.tally = stats.tally(target, tp.topic(), tp.partition());
        this.incarnation = Incarnations.of(tp.topic(), tp.partition());
        this.topicId = Incarnations.topicIdOf(tp.topic());
        this.syncs = syncs;
    }

    /** A record of {@code bytes} bytes (key and value) goes out. */
    void sending(long bytes) {
        synchronized (tally) {
            tally.sent(bytes);
            sent++;
        }
    }

    /**
     * The producer's callback for the record at {@code offset}, read in {@code readIn}: the one
     * place where an acknowledgement becomes the partition's position and an offset sync ({@code writer} null:
     * none). {@code latencyMs}: since the record's timestamp, {@link Stats#NO_LATENCY} if unknown or failed.
     */
    void acknowledged(long offset, long readIn, RecordMetadata metadata, Exception exception, long latencyMs,
                      OffsetSyncWriter writer) {
        synchronized (tally) {
            done++;
            if (exception != null) {
                broken = true;
                if (writer != null) {
                    writer.reset(syncs);
                }
                stopped = true;
            } else {
                tally.acknowledged(latencyMs);
                if (!stopped && offset >= 0) {
                    tally.advance(readIn, offset + 1);
                }
                if (writer != null && !broken) {
                    if (offset >= 0 && metadata != null && metadata.hasOffset()) {
                        writer.acked(syncs, offset, metadata.offset());
                    } else {
                        writer.reset(syncs);  // an offset unknown (acks=0): the run ends here
                    }
                }
            }
            if (done == sent) {
                broken = false;
            }
        }
    }

    /** The record just counted by {@link #sending} was refused before it was sent (the task was interrupted). */
    void notSent() {
        synchronized (tally) {
            sent--;
        }
    }

    /** Records sent and not yet acknowledged or failed. */
    long inFlight() {
        synchronized (tally) {
            return sent - done;
        }
    }
}
