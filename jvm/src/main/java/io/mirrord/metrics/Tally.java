package io.mirrord.metrics;

import java.util.Arrays;

/**
 * One source partition's counts in its target topic, kept by the one stream's writer that writes its records:
 * plain fields under this object's monitor, which the writer holds anyway, moved into the shared counters
 * by {@link Stats#drain()}. Measured: LongAdders and an AtomicLong touched per record by every task thread and the
 * producer's I/O thread were the producer interceptor's largest cost on two cores.
 */
public final class Tally {
    private final Stats.Topic topic;
    private final AckedPosition position;
    private final Histogram shared;  // the Stats' latency histogram
    private long records;  // all guarded by this
    private long bytes;
    private final long[] latencyCounts = new long[Histogram.BUCKETS];
    private long latencySumMs;
    private long incarnation = Long.MIN_VALUE;
    private long next = -1;

    Tally(Stats.Topic topic, AckedPosition position, Histogram shared) {
        this.topic = topic;
        this.position = position;
        this.shared = shared;
    }

    /** A record of {@code size} bytes (key and value) sent; the caller holds this tally's monitor. */
    public void sent(long size) {
        bytes += size;
    }

    /**
     * A record acknowledged {@code latencyMs} after its timestamp ({@link Stats#NO_LATENCY}: unknown); the caller
     * holds this tally's monitor.
     */
    public void acknowledged(long latencyMs) {
        records++;
        if (latencyMs != Stats.NO_LATENCY) {
            long ms = Math.max(0, latencyMs);  // clock skew: counted as 0
            latencyCounts[Histogram.bucket(ms)]++;
            latencySumMs += ms;
        }
    }

    /**
     * The source partition acknowledged up to {@code offset} (exclusive), read in {@code incarnation}; the
     * caller holds this tally's monitor.
     */
    public void advance(long incarnation, long offset) {
        if (incarnation != this.incarnation) {
            this.incarnation = incarnation;
            next = offset;
        } else {
            next = Math.max(next, offset);
        }
    }

    synchronized void moveOut() {
        if (records != 0) {
            topic.records.add(records);
            records = 0;
        }
        if (bytes != 0) {
            topic.bytes.add(bytes);
            bytes = 0;
        }
        shared.add(latencyCounts, latencySumMs);  // adds the buckets that are not 0
        Arrays.fill(latencyCounts, 0);
        latencySumMs = 0;
        if (next >= 0) {
            position.advance(incarnation, next);
        }
    }
}
