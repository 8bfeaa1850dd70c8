package io.mirrord.metrics;

/**
 * The source offset after the last record of one source partition the target acknowledged, every record
 * sent before it acknowledged too (-1: none yet), in the partition's incarnation (docs/decisions.md §10):
 * within one it only moves forward, a later one replaces it, an earlier one is ignored.
 */
final class AckedPosition {
    private long incarnation = Long.MIN_VALUE;  // all guarded by this
    private long next = -1;
    private long shippedIncarnation = Long.MIN_VALUE;
    private long shipped = -1;

    synchronized void advance(long incarnation, long offset) {
        if (incarnation > this.incarnation) {
            this.incarnation = incarnation;
            next = offset;
        } else if (incarnation == this.incarnation && offset > next) {
            next = offset;
        }
    }

    synchronized long get() {
        return next;
    }

    /** {incarnation, next} if it moved since the last call, else null. */
    synchronized long[] takeNew() {
        if (next < 0 || (incarnation == shippedIncarnation && next <= shipped)) {
            return null;
        }
        shippedIncarnation = incarnation;
        shipped = next;
        return new long[] {incarnation, next};
    }
}
