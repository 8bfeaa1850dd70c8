package io.mirrord.sink;

import io.mirrord.metrics.Stats;
import io.mirrord.metrics.WarnLimiter;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Offset syncs in MirrorMaker 2's format and by its rules ({@code MirrorSourceTask.PartitionState}),
 * extended so that translation can be exact: each sync carries, in the header {@value #RUN_START_HEADER},
 * the upstream offset where its run began, a run being a stretch over which source and target offsets
 * advanced together one for one.
 *
 * <p>Extended also so that compaction cannot hide a copy from translation (docs/decisions.md §7): the key
 * is MirrorMaker 2's (topic, partition) followed by this writer's id (8 random bytes; Kafka's
 * {@code OffsetSync.deserializeRecord} reads the first two fields and ignores the rest), so compaction
 * keeps every writer's newest sync; and a sync carries, in the header {@value #EARLIER_RUNS_HEADER}, the
 * writer's earlier runs of that partition (thinned to {@value PartitionState#EARLIER_RUNS}, never answering
 * higher than they did), so its newest sync alone shows every copy the writer made.
 *
 * <p>The rules ({@link PartitionState}) decide on the caller's thread, the producer's I/O thread; the
 * writing is done by the writer's own thread, so that a slow or missing syncs topic never holds up
 * the records being mirrored. That thread also emits the delayed syncs every {@code flushMs}.
 */
final class OffsetSyncWriter implements AutoCloseable {
    static final String RUN_START_HEADER = "mirrord.run.start";
    static final String EARLIER_RUNS_HEADER = "mirrord.writer.runs";
    /** The writer's runs from before it heard that the target topic was recreated: a reader may only lower with them. */
    static final String RUNS_BEFORE_HEADER = "mirrord.writer.runs.before";
    /** Syncs waiting for the writer's thread beyond this many are dropped (and counted as errors). */
    static final int OUTBOX_CAPACITY = 100_000;
    /** How long the writer's thread gathers syncs after the first one before writing them. */
    static final long BATCH_MS = 50;
    private static final Logger log = LoggerFactory.getLogger(OffsetSyncWriter.class);

    private final Producer<byte[], byte[]> producer;
    private final String topic;
    private final long writerId = new SecureRandom().nextLong();  // a new key per writer: compaction keeps each one's newest
    private final long offsetLagMax;
    private final long flushMs;
    private final Stats stats;
    private final Map<TopicPartition, PartitionState> states = new HashMap<>();  // by source partition; guarded by this
    private final BlockingQueue<Sync> outbox = new LinkedBlockingQueue<>(OUTBOX_CAPACITY);
    private final WarnLimiter warnings = new WarnLimiter(60_000);
    private final Thread thread;
    private volatile TargetTopicIds targetIds;  // null: the syncs name no target topic incarnation
    private long emitted;  // syncs put in the outbox; guarded by this
    private final Object progress = new Object();
    private long finished;  // syncs acknowledged or failed; guarded by progress

    /**
     * With {@code background} false no thread is started: the caller emits delayed syncs with
     * {@link #flushPending()} and writes with {@link #sendQueued()} (tests do).
     */
    OffsetSyncWriter(Producer<byte[], byte[]> producer, String topic, long offsetLagMax, long flushMs, Stats stats,
                     boolean background) {
        this.producer = producer;
        this.topic = topic;
        this.offsetLagMax = offsetLagMax;
        this.flushMs = flushMs;
        this.stats = stats;
        if (background) {
            thread = new Thread(this::run, "mirrord-offset-syncs-" + topic);
            thread.setDaemon(true);
            thread.start();
        } else {
            thread = null;
        }
    }

    /**
     * From now on each sync names the id of its target topic ({@code targetPrefix} + the source topic), asked of
     * the target with {@code clientConfig}; a target topic recreated makes the writer forget its runs of it.
     */
    TargetTopicIds nameTargetTopics(Map<String, ?> clientConfig, String targetPrefix) {
        TargetTopicIds ids = new TargetTopicIds(clientConfig, targetPrefix, this::recreated);
        targetIds = ids;
        return ids;
    }

    /**
     * The target topic of {@code sourceTopic} was recreated: the runs held of it were copies into the old one,
     * or (acknowledged before this writer heard of it) into the new one. Each delayed sync is emitted, still
     * naming the old topic (a reader may only lower a translation with it), and the runs are forgotten.
     */
    synchronized void recreated(String sourceTopic) {
        for (PartitionState state : states.values()) {
            if (state.source.topic().equals(sourceTopic)) {
                Sync last = state.takePending();
                if (last != null) {
                    enqueue(last);
                }
                state.forget();
            }
        }
    }

    /** The rules' state of {@code source}, made on first use; callers keep it to skip the lookup per record. */
    synchronized PartitionState state(TopicPartition source) {
        return states.computeIfAbsent(source, s -> new PartitionState(s, offsetLagMax));
    }

    /** The record at {@code upstream} in {@code source} was written at {@code downstream} in the target. */
    void acked(TopicPartition source, long upstream, long downstream) {
        acked(state(source), upstream, downstream);
    }

    synchronized void acked(PartitionState state, long upstream, long downstream) {
        Sync first = state.update(upstream, downstream);
        if (first != null) {
            enqueue(first);
            Sync second = state.takeEmitted();
            if (second != null) {
                enqueue(second);
            }
        }
    }

    /**
     * Ends a partition's run: its delayed sync is emitted (the records it shows were acknowledged: without
     * it no sync would show them, and translation could pass them; docs/decisions.md §7), and its next
     * record starts afresh.
     */
    synchronized void reset(PartitionState state) {
        Sync last = state.takePending();
        if (last != null) {
            enqueue(last);
        }
        state.reset();
    }

    /** Emits every delayed sync. */
    synchronized void flushPending() {
        for (PartitionState state : states.values()) {
            Sync sync = state.takePending();
            if (sync != null) {
                enqueue(sync);
            }
        }
    }

    /** Writes the emitted syncs, oldest first, without waiting for their acknowledgement; returns how many. */
    int sendQueued() {
        int sent = 0;
        for (Sync sync = outbox.poll(); sync != null; sync = outbox.poll()) {
            send(sync);
            sent++;
        }
        return sent;
    }

    /** Takes the emitted syncs, oldest first, instead of writing them ({@link OffsetSyncReplay}). */
    List<Sync> takeQueued() {
        List<Sync> taken = new ArrayList<>();
        outbox.drainTo(taken);
        return taken;
    }

    /**
     * Emits the delayed syncs and waits at most {@code timeout} until every sync emitted so far has been
     * acknowledged or has failed; false if time ran out. The writing stays with the writer's thread, so
     * syncs are still written in the order they were emitted.
     */
    boolean flush(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        long target;
        synchronized (this) {
            flushPending();
            target = emitted;
        }
        if (thread == null) {
            sendQueued();
        }
        synchronized (progress) {
            try {
                while (finished < target) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        return false;
                    }
                    TimeUnit.NANOSECONDS.timedWait(progress, left);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
    }

    @Override
    public void close() {
        close(Duration.ofSeconds(5));
    }

    /** Emits the delayed syncs and writes what is left, waiting at most about {@code timeout} twice. */
    void close(Duration timeout) {
        if (thread != null) {
            thread.interrupt();
            try {
                thread.join(timeout.toMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (thread == null || !thread.isAlive()) {
            flushPending();
            sendQueued();
        } else {
            log.warn("offset-sync writer for {} still busy after {} ms; {} offset syncs not written",
                    topic, timeout.toMillis(), outbox.size());
        }
        producer.close(timeout);
        releaseTargetTopics();
    }

    /** Stops asking the target for its topics' ids (the syncs' producer is another owner's). */
    void releaseTargetTopics() {
        TargetTopicIds ids = targetIds;
        targetIds = null;
        if (ids != null) {
            ids.close();
        }
    }

    private void run() {
        long flushNanos = TimeUnit.MILLISECONDS.toNanos(flushMs);
        long nextFlush = System.nanoTime() + flushNanos;
        try {
            while (!Thread.currentThread().isInterrupted()) {
                Sync sync = outbox.poll(Math.max(0, nextFlush - System.nanoTime()), TimeUnit.NANOSECONDS);
                if (sync != null) {
                    send(sync);
                    // the syncs emitted meanwhile, as one batch: a wake-up per sync (thousands a second in a
                    // backfill) took the cores from the records' threads
                    TimeUnit.MILLISECONDS.sleep(BATCH_MS);
                    sendQueued();
                }
                if (System.nanoTime() - nextFlush >= 0) {
                    flushPending();
                    sendQueued();
                    nextFlush = System.nanoTime() + flushNanos;
                }
            }
        } catch (InterruptedException e) {
            // close() stops the thread
        }
    }

    private void enqueue(Sync sync) {
        TargetTopicIds ids = targetIds;
        if (ids != null) {
            sync = sync.in(ids.of(sync.source().topic()));
        }
        if (outbox.offer(sync)) {
            emitted++;
        } else {
            failed(new IllegalStateException(OUTBOX_CAPACITY + " offset syncs already waiting to be written"));
        }
    }

    private void send(Sync sync) {
        try {
            producer.send(sync.toRecord(topic, writerId), (metadata, e) -> {
                if (e == null) {
                    stats.addSync();
                } else {
                    failed(e);
                }
                finished();
            });
        } catch (RuntimeException e) {
            failed(e);
            finished();
        }
    }

    private void finished() {
        synchronized (progress) {
            finished++;
            progress.notifyAll();
        }
    }

    private void failed(Exception e) {
        stats.addSyncError();
        long dropped = warnings.admit();
        if (dropped >= 0) {
            log.warn("cannot write an offset sync to {}{}: {}", topic,
                    dropped > 0 ? " (and " + dropped + " more since the last warning)" : "", e.toString());
        }
    }

    /**
     * One offset sync: {@code upstream} in {@code source} is {@code downstream} in the target; {@code earlier}
     * holds the writer's earlier runs of the partition as (upstream, downstream, run start) triples, by
     * upstream offset.
     */
    record Sync(TopicPartition source, long upstream, long downstream, long runStart, long[] earlier, long[] before,
                String targetTopicId) {
        static final long[] NONE = new long[0];

        Sync(TopicPartition source, long upstream, long downstream, long runStart) {
            this(source, upstream, downstream, runStart, NONE, NONE, null);
        }

        Sync(TopicPartition source, long upstream, long downstream, long runStart, long[] earlier) {
            this(source, upstream, downstream, runStart, earlier, NONE, null);
        }

        /** This sync, naming the incarnation of the target topic it was copied into (null: unknown). */
        Sync in(String topicId) {
            return new Sync(source, upstream, downstream, runStart, earlier, before, topicId);
        }

        /**
         * MirrorMaker 2's {@code OffsetSync} for partition 0 of {@code syncTopic}, its key followed by
         * {@code writer}, with the run start and (if any) the earlier runs as headers.
         */
        ProducerRecord<byte[], byte[]> toRecord(String syncTopic, long writer) {
            RecordHeaders headers = new RecordHeaders();
            headers.add(RUN_START_HEADER, ByteBuffer.allocate(Long.BYTES).putLong(runStart).array());
            if (earlier.length > 0) {
                headers.add(EARLIER_RUNS_HEADER, longs(earlier));
            }
            if (before.length > 0) {
                headers.add(RUNS_BEFORE_HEADER, longs(before));
            }
            if (targetTopicId != null) {
                headers.add(TargetTopicIds.HEADER, targetTopicId.getBytes(StandardCharsets.UTF_8));
            }
            byte[] key = key();
            byte[] keyed = ByteBuffer.allocate(key.length + Long.BYTES).put(key).putLong(writer).array();
            return new ProducerRecord<>(syncTopic, 0, null, keyed, value(), headers);
        }

        private static byte[] longs(long[] values) {
            ByteBuffer out = ByteBuffer.allocate(values.length * Long.BYTES);
            for (long v : values) {
                out.putLong(v);
            }
            return out.array();
        }

        /** MirrorMaker 2's key: Kafka protocol STRING topic (INT16 length, UTF-8), INT32 partition. */
        byte[] key() {
            byte[] name = source.topic().getBytes(StandardCharsets.UTF_8);
            return ByteBuffer.allocate(Short.BYTES + name.length + Integer.BYTES)
                    .putShort((short) name.length).put(name).putInt(source.partition()).array();
        }

        /** INT64 upstream offset, INT64 downstream offset. */
        byte[] value() {
            return ByteBuffer.allocate(2 * Long.BYTES).putLong(upstream).putLong(downstream).array();
        }
    }

    /** The rules for one source partition; no I/O, no locking (the writer locks). No allocation per record
     * but for the syncs it emits: it runs once per acknowledged record, on the producer's I/O thread. */
    static final class PartitionState {
        /** Earlier runs a sync carries at most; beyond, the two lowest merge (see {@link #remember}). */
        static final int EARLIER_RUNS = 8;
        private final TopicPartition source;
        private final long offsetLagMax;
        private boolean started;
        private long previousUpstream;
        private long previousDownstream;
        private long runStart;
        private long lastSyncedDownstream;
        private boolean pending;  // the previous record is a delayed sync
        private Sync second;  // a second sync emitted by the last update, for takeEmitted()
        private Sync furthest;  // the current run's sync furthest along, once one was emitted
        private long[] earlier = Sync.NONE;  // the writer's earlier runs, as their furthest syncs (triples)
        private long[] before = Sync.NONE;  // its runs from before the target topic was recreated (triples)

        PartitionState(TopicPartition source, long offsetLagMax) {
            this.source = source;
            this.offsetLagMax = offsetLagMax;
        }

        /** The first sync to emit now, or null; a second one, if any, from {@link #takeEmitted()}. */
        Sync update(long upstream, long downstream) {
            Sync first = null;
            second = null;
            if (!started || upstream != previousUpstream + 1 || downstream != previousDownstream + 1) {
                if (pending) {
                    first = emit(previousUpstream, previousDownstream);  // the previous run's end
                }
                endRun();
                runStart = upstream;
                Sync now = emit(upstream, downstream);
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

        Sync takeEmitted() {
            Sync sync = second;
            second = null;
            return sync;
        }

        /** The delayed sync, now emitted, or null. */
        Sync takePending() {
            if (!pending) {
                return null;
            }
            pending = false;
            lastSyncedDownstream = previousDownstream;
            return emit(previousUpstream, previousDownstream);
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
            earlier = Sync.NONE;
        }

        /** A sync of the current run, carrying the earlier runs; it is the run's furthest so far. */
        private Sync emit(long upstream, long downstream) {
            furthest = new Sync(source, upstream, downstream, runStart, earlier, before, null);
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
}
