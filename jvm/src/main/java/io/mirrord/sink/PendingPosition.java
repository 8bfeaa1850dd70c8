package io.mirrord.sink;

import io.mirrord.metrics.Stats;
import java.util.Arrays;

/** What a stream's open transaction holds of one source partition: counted, and its position reached, at commit. */
final class PendingPosition {
    final SourcePartition source;
    long next = -1;
    long incarnation;
    String topicId;  // of the source topic the records were read from; null: not known
    long[] timestamps = new long[16];
    int count;

    PendingPosition(SourcePartition source) {
        this.source = source;
    }

    /** A record of {@code bytes} bytes (key and value) at {@code sourceOffset} sent in the open transaction. */
    void add(long sourceOffset, long timestampMs, long bytes) {
        synchronized (source.tally) {
            source.tally.sent(bytes);
        }
        if (count == timestamps.length) {
            timestamps = Arrays.copyOf(timestamps, count * 2);
        }
        timestamps[count++] = timestampMs;
        next = sourceOffset + 1;
        incarnation = source.incarnation.get();
        topicId = source.topicId.get();
    }

    /** The transaction committed: its records are mirrored, and the partition's position reached. */
    void counted(long nowMs) {
        synchronized (source.tally) {
            for (int i = 0; i < count; i++) {
                source.tally.acknowledged(timestamps[i] >= 0 ? nowMs - timestamps[i] : Stats.NO_LATENCY);
            }
            source.tally.advance(incarnation, next);
        }
    }
}
