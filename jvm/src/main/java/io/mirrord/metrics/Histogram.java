package io.mirrord.metrics;

import java.io.Serializable;
import java.math.BigDecimal;
import java.util.Locale;
import java.util.concurrent.atomic.LongAdder;

/**
 * Durations in milliseconds counted in {@link #BOUNDS_SECONDS}' buckets, for a Prometheus histogram the supervisor
 * exports as it is (mirrord/metrics.py, {@code BucketHistogram}): the replication latency, and exactly once's
 * transactions and their commits.
 */
final class Histogram {
    /** Bucket upper bounds in seconds (Prometheus {@code le}); a last bucket takes the rest. */
    static final double[] BOUNDS_SECONDS = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600};
    static final int BUCKETS = BOUNDS_SECONDS.length + 1;
    private static final long[] BOUNDS_MS = new long[BOUNDS_SECONDS.length];

    static {
        for (int i = 0; i < BOUNDS_SECONDS.length; i++) {
            BOUNDS_MS[i] = Math.round(BOUNDS_SECONDS[i] * 1000);
        }
    }

    private final LongAdder[] counts = new LongAdder[BUCKETS];
    private final LongAdder sumMs = new LongAdder();

    Histogram() {
        for (int i = 0; i < BUCKETS; i++) {
            counts[i] = new LongAdder();
        }
    }

    void observeMs(long ms) {
        long clamped = Math.max(0, ms);  // clock skew: counted as 0
        counts[bucket(clamped)].increment();
        sumMs.add(clamped);
    }

    /** Adds counts kept elsewhere (a {@link Tally}'s, a {@link Moved} from another JVM). */
    void add(long[] moreCounts, long moreSumMs) {
        for (int i = 0; i < BUCKETS; i++) {
            if (moreCounts[i] != 0) {
                counts[i].add(moreCounts[i]);
            }
        }
        if (moreSumMs != 0) {
            sumMs.add(moreSumMs);
        }
    }

    /** Moves every count out; counts added meanwhile stay here, none is lost. */
    Moved drain() {
        Moved moved = new Moved();
        for (int i = 0; i < BUCKETS; i++) {
            moved.counts[i] = take(counts[i]);
        }
        moved.sumMs = take(sumMs);
        return moved;
    }

    /** {@code {"bounds":[0.005,...,3600],"counts":[16 counts, not cumulative, the last above 3600 s],"sum":1.234}}. */
    void appendJson(StringBuilder json) {
        json.append("{\"bounds\":[");
        for (int i = 0; i < BOUNDS_SECONDS.length; i++) {
            String bound = BigDecimal.valueOf(BOUNDS_SECONDS[i]).stripTrailingZeros().toPlainString();
            json.append(i == 0 ? "" : ",").append(bound);
        }
        json.append("],\"counts\":[");
        for (int i = 0; i < BUCKETS; i++) {
            json.append(i == 0 ? "" : ",").append(counts[i].sum());
        }
        json.append("],\"sum\":").append(String.format(Locale.ROOT, "%.3f", sumMs.sum() / 1000.0)).append('}');
    }

    static int bucket(long ms) {
        for (int i = 0; i < BOUNDS_MS.length; i++) {
            if (ms <= BOUNDS_MS[i]) {
                return i;
            }
        }
        return BOUNDS_MS.length;
    }

    static long take(LongAdder adder) {
        long value = adder.sum();
        adder.add(-value);
        return value;
    }

    /** Counts moved out of one histogram by {@link #drain()}, to be added to another's. */
    static final class Moved implements Serializable {
        private static final long serialVersionUID = 1L;
        final long[] counts = new long[BUCKETS];
        long sumMs;

        boolean isEmpty() {
            if (sumMs != 0) {
                return false;
            }
            for (long count : counts) {
                if (count != 0) {
                    return false;
                }
            }
            return true;
        }
    }
}
