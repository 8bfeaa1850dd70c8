package io.mirrord.sink;

import org.apache.kafka.common.TopicPartition;

/** The rules for one source partition; no I/O, no locking (the writer locks). No allocation per record
 * but for the syncs it emits: it runs once per acknowledged record, on the producer's I/O thread. */
final class SyncRuns {
    /** Earlier runs a sync carries at most; beyond, the two lowest merge (see {@link #remember}). */
    static final int EARLIER_RUNS = 8;
    final TopicPartition source;
    private final long offsetLagMax;
    private boolean started;
    private long previousUpstream;
    private long previousDownstream;
    private long runStart;
    private long lastSyncedDownstream;
    private boolean pending;  // the previous record is a delayed sync
    private boolean wentBack;  // the last record's target offset was not above the previous one's: a new target topic
    private OffsetSync second;  // a second sync emitted by the last update, for takeEmitted()
    private OffsetSync furthest;  // the current run's sync furthest along, once one was emitted
    private long[] earlier = OffsetSync.NONE;  // the writer's earlier runs, as their furthest syncs (triples)
    private long[] before = OffsetSync.NONE;  // its runs from before the target topic was recreated (triples)

    SyncRuns(TopicPartition source, long offsetLagMax) {
        this.source = source;
        this.offsetLagMax = offsetLagMax;
    }

    /** The first sync to emit now, or null; a second one, if any, from {@link #takeEmitted()}. */
    OffsetSync update(long upstream, long downstream) {
        OffsetSync first = null;
        second = null;
        wentBack = started && downstream <= previousDownstream;
        if (!started || upstream != previousUpstream + 1 || downstream != previousDownstream + 1) {
            if (pending) {
                first = emit(previousUpstream, previousDownstream);  // the previous run's end
            }
            endRun();
            runStart = upstream;
            OffsetSync now = emit(upstream, downstream);
            if (first == null) {
                first = now;
            } else {
                second = now;
            }
            pending = false;
            started = true;
        } else if (downstream - (lastSyncedDownstream + 1) >= offsetLagMax) {
            pending = false;
            first = emit(upstream, downstream);
        } else {
            pending = true;
        }
        previousUpstream = upstream;
        previousDownstream = downstream;
        if (first != null) {
            lastSyncedDownstream = downstream;
        }
        return first;
    }

    /** Whether the last record went into the target below the one before: the target topic was recreated. */
    boolean wentBack() {
        return wentBack;
    }

    OffsetSync takeEmitted() {
        OffsetSync sync = second;
        second = null;
        return sync;
    }

    /** The delayed sync, now emitted, or null. */
    OffsetSync takePending() {
        if (!pending) {
            return null;
        }
        pending = false;
        lastSyncedDownstream = previousDownstream;
        return emit(previousUpstream, previousDownstream);
    }

    /** The current run's sync furthest along (its delayed one, now emitted, if any), or null: the whole run. */
    OffsetSync takeFurthest() {
        OffsetSync pending = takePending();
        return pending != null ? pending : furthest;
    }

    void reset() {
        endRun();
        started = false;
        pending = false;
        second = null;
    }

    /**
     * The target topic was recreated: the runs held were copies into the old topic, or into the new one
     * before the writer heard of it. They go on only as runs a reader may lower a translation with.
     */
    void forget() {
        reset();
        before = earlier;
        earlier = OffsetSync.NONE;
    }

    /** A sync of the current run, carrying the earlier runs; it is the run's furthest so far. */
    private OffsetSync emit(long upstream, long downstream) {
        furthest = new OffsetSync(source, upstream, downstream, runStart, earlier, before, null);
        return furthest;
    }

    /** The current run ends: its furthest sync joins the earlier runs. */
    private void endRun() {
        if (furthest != null) {
            earlier = remember(earlier, furthest.upstream(), furthest.downstream(), furthest.runStart());
            furthest = null;
        }
    }

    /**
     * {@code runs} with one more, by upstream offset (a new array: the emitted syncs keep theirs). Beyond
     * {@value #EARLIER_RUNS} the two lowest become one run of one record at the upper one's upstream
     * offset, at the lower of the two runs' first target offsets: for every group it answers at or below
     * what either did (docs/decisions.md §7), so only groups in old runs lose exactness.
     */
    static long[] remember(long[] runs, long upstream, long downstream, long runStart) {
        int n = runs.length / 3;
        int at = 0;
        while (at < n && runs[3 * at] <= upstream) {
            at++;
        }
        long[] out = new long[runs.length + 3];
        System.arraycopy(runs, 0, out, 0, 3 * at);
        out[3 * at] = upstream;
        out[3 * at + 1] = downstream;
        out[3 * at + 2] = runStart;
        System.arraycopy(runs, 3 * at, out, 3 * at + 3, runs.length - 3 * at);
        if (n + 1 <= EARLIER_RUNS) {
            return out;
        }
        long lowest = Math.min(firstPosition(out, 0), firstPosition(out, 1));
        long[] merged = new long[out.length - 3];
        merged[0] = out[3];
        merged[1] = lowest;
        merged[2] = out[3];
        System.arraycopy(out, 6, merged, 3, out.length - 6);
        return merged;
    }

    /** Where the first record of run {@code i} of {@code runs} is in the target. */
    private static long firstPosition(long[] runs, int i) {
        long upstream = runs[3 * i];
        return runs[3 * i + 1] - (upstream - Math.min(runs[3 * i + 2], upstream));
    }
}
