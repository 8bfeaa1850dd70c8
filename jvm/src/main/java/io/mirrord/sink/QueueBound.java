package io.mirrord.sink;

/**
 * How many record bytes of a stream may await the target's acknowledgement before its next send waits
 * (docs/decisions.md §2). At most the fixed bound ({@link StreamProducers#queueBound}); under leader election it
 * follows the rate at which the target acknowledges, so a record waits in the producer about a third of its
 * delivery timeout at most: a slower target (behind a slow link, a WAN between regions) then holds the records in
 * the source, where they wait without expiring, instead of in the producer, where they expire and restart the
 * query. One record in {@link #SAMPLE_EVERY} is timed from its send to its acknowledgement; the bytes the target
 * acknowledged meanwhile, over that time, are its rate, and each sample moves the bound an eighth of the way to
 * what it acknowledges in a sixth of the delivery timeout. A sixth, not the third: the producer drains a batch of
 * each partition in turn, and a stream reads a partition's records at a time, so the records of the partition
 * that had much queued when another's came wait about twice what awaits over the rate (the others' records
 * overtake them, sent as their own are acknowledged). The rate is not the bytes queued ahead of the record when it
 * was sent, over its wait (Little's law): an overtaking record gave a third more than the target's rate. With both,
 * a backlog behind a slow link expired a batch in one CI run ({@code QueueBoundFollowsTest} measures each). It
 * starts at the floor, so a slow link's first burst does not expire either; a quick target raises it within a few
 * hundred records (30 samples).
 */
final class QueueBound {
    static final int SAMPLE_EVERY = 16;  // a power of two
    static final long FLOOR = 64L << 10;  // or a quarter of the fixed bound, if less
    private static final int WEIGHT = 8;  // each sample moves the bound an eighth of the way
    static final int SETTLED = 64;  // samples after which the bound says what the target takes, not where it began
    private final long max;
    private final long targetNanos;  // 0: fixed at max
    private volatile long bound;
    private volatile int samples;  // written by the producer's I/O thread only, up to SETTLED
    private int sends;  // the sending thread's count

    private QueueBound(long max, long targetNanos) {
        this.max = max;
        this.targetNanos = targetNanos;
        this.bound = targetNanos == 0 ? max : clamp(0);  // following: from the floor up, as acknowledgements come
    }

    /** A bound that stays at {@code max} (no delivery timeout: the producer waits for the target). */
    static QueueBound fixed(long max) {
        return new QueueBound(max, 0);
    }

    /**
     * At most {@code max} bytes, and no more than the target acknowledges in a sixth of {@code deliveryMs} (never
     * below {@link #FLOOR} or a quarter of {@code max}, whichever is less).
     */
    static QueueBound following(long max, long deliveryMs) {
        return new QueueBound(max, Math.max(1, deliveryMs) * 1_000_000L / 6);
    }

    long get() {
        return bound;
    }

    /** Whether the target's rate holds the bound under the fixed one (not merely its start from the floor). */
    boolean followed() {
        return samples >= SETTLED && bound < max;
    }

    /** In the sending thread, once a send: whether this record is to be timed. */
    boolean sample() {
        return targetNanos > 0 && (++sends & (SAMPLE_EVERY - 1)) == 0;
    }

    /**
     * A timed record acknowledged {@code waitNanos} after its send, the target having acknowledged {@code acked}
     * bytes of the stream's records meanwhile (its own included); in the producer's I/O thread.
     */
    void acknowledged(long acked, long waitNanos) {
        if (targetNanos == 0) {
            return;
        }
        double rate = (double) acked / Math.max(1, waitNanos);  // bytes a nanosecond
        long wanted = clamp((long) Math.min(Long.MAX_VALUE, rate * targetNanos));
        if (samples < SETTLED) {
            samples++;
        }
        long now = bound;
        long step = (wanted - now) / WEIGHT;
        bound = clamp(step == 0 ? wanted : now + step);
    }

    private long clamp(long bytes) {
        return Math.max(Math.min(FLOOR, max / 4), Math.min(max, bytes));
    }
}
