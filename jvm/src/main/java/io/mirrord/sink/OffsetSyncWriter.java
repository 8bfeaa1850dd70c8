package io.mirrord.sink;

import io.mirrord.metrics.Stats;
import io.mirrord.log.WarnLimiter;

import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Offset syncs in MirrorMaker 2's format and by its rules ({@code MirrorSourceTask.SyncRuns}),
 * extended so that translation can be exact: each sync carries, in the header {@value #RUN_START_HEADER},
 * the upstream offset where its run began, a run being a stretch over which source and target offsets
 * advanced together one for one.
 *
 * <p>Extended also so that compaction cannot hide a copy from translation (docs/decisions.md §7): the key
 * is MirrorMaker 2's (topic, partition) followed by this writer's id (8 random bytes; Kafka's
 * {@code OffsetSync.deserializeRecord} reads the first two fields and ignores the rest), so compaction
 * keeps every writer's newest sync; and a sync carries, in the header {@value #EARLIER_RUNS_HEADER}, the
 * writer's earlier runs of that partition (thinned to {@value SyncRuns#EARLIER_RUNS}, never answering
 * higher than they did), so its newest sync alone shows every copy the writer made.
 *
 * <p>The rules ({@link SyncRuns}) decide on the caller's thread, the producer's I/O thread; the writing is done
 * by the writer's own thread (which also emits the delayed syncs every {@code flushMs}), so that a slow or
 * missing syncs topic never holds up the records being mirrored; it writes {@value #BATCH_MS} ms of syncs at
 * once, without those a later one shows ({@link SyncBatch}).
 */
final class OffsetSyncWriter implements AutoCloseable {
    static final String RUN_START_HEADER = "mirrord.run.start";
    static final String EARLIER_RUNS_HEADER = "mirrord.writer.runs";
    /** The writer's runs from before it heard that the target topic was recreated: a reader may only lower with them. */
    static final String RUNS_BEFORE_HEADER = "mirrord.writer.runs.before";
    static final String UNSURE = "";  // the target topic id a sync names while its writer does not know it
    static final int OUTBOX_CAPACITY = 100_000;  // syncs waiting beyond it are dropped (and counted as errors)
    static final long BATCH_MS = 50;  // how long the writer's thread gathers syncs after the first before writing
    private static final Logger log = LoggerFactory.getLogger(OffsetSyncWriter.class);

    private final Producer<byte[], byte[]> producer;
    private final String topic;
    private final long writerId = new SecureRandom().nextLong();  // a new key per writer: compaction keeps each one's newest
    private final long offsetLagMax;
    private final long flushMs;
    private final Stats stats;
    private final Map<TopicPartition, SyncRuns> states = new HashMap<>();  // by source partition; guarded by this
    private final BlockingQueue<OffsetSync> outbox = new LinkedBlockingQueue<>(OUTBOX_CAPACITY);
    private final WarnLimiter warnings = new WarnLimiter(60_000);
    private final Thread thread;
    private volatile TargetTopicIds targetIds;  // null: the syncs name no target topic incarnation
    private long emitted;  // syncs put in the outbox; guarded by this
    private final SyncProgress progress = new SyncProgress();  // of the syncs emitted, those done

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
     * the target with {@code clientConfig}; a target topic recreated makes the writer forget its runs of it. A sync
     * emitted before its topic's id is known names it as unknown ({@value #UNSURE}): a reader may only lower a
     * translation with it, since the topic may have been recreated before the id came (docs/decisions.md §7).
     */
    TargetTopicIds nameTargetTopics(Map<String, ?> clientConfig, String targetPrefix) {
        TargetTopicIds ids = new TargetTopicIds(clientConfig, targetPrefix, this::recreated, this::learned);
        targetIds = ids;
        return ids;
    }

    /**
     * The target topic of {@code sourceTopic} was recreated: the runs held of it were copies into the old one,
     * or (acknowledged before this writer heard of it) into the new one. Each delayed sync is emitted, still
     * naming the old topic (a reader may only lower a translation with it), and the runs are forgotten.
     */
    synchronized void recreated(String sourceTopic) {
        for (SyncRuns state : states.values()) {
            if (state.source.topic().equals(sourceTopic)) {
                emitPending(state);
                state.forget();
            }
        }
    }

    /** The first id of {@code sourceTopic}'s target topic came: each run's furthest sync again, naming it (§7). */
    synchronized void learned(String sourceTopic) {
        states.values().stream().filter(state -> state.source.topic().equals(sourceTopic))
                .map(SyncRuns::takeFurthest).filter(Objects::nonNull).forEach(this::enqueue);
    }

    /** The rules' state of {@code source}, made on first use; callers keep it to skip the lookup per record. */
    synchronized SyncRuns state(TopicPartition source) {
        return states.computeIfAbsent(source, s -> new SyncRuns(s, offsetLagMax));
    }

    /** The record at {@code upstream} in {@code source} was written at {@code downstream} in the target. */
    void acked(TopicPartition source, long upstream, long downstream) {
        acked(state(source), upstream, downstream);
    }

    synchronized void acked(SyncRuns state, long upstream, long downstream) {
        OffsetSync first = state.update(upstream, downstream);
        TargetTopicIds ids = state.wentBack() ? targetIds : null;  // the volatile read only when it matters
        if (ids != null) {
            ids.askSoon();  // a recreated target topic: its new id, before more records are copied into it
        }
        if (first != null) {
            enqueue(first);
            OffsetSync second = state.takeEmitted();
            if (second != null) {
                enqueue(second);
            }
        }
    }

    /**
     * Ends a partition's run: its delayed sync is emitted (the records it shows were acknowledged: without it no
     * sync would show them, and translation could pass them; docs/decisions.md §7); its next record starts afresh.
     */
    synchronized void reset(SyncRuns state) {
        emitPending(state);
        state.reset();
    }

    /** Emits every delayed sync. */
    synchronized void flushPending() {
        states.values().forEach(this::emitPending);
    }

    private void emitPending(SyncRuns state) {
        OffsetSync last = state.takePending();
        if (last != null) {
            enqueue(last);
        }
    }

    /** Writes the emitted syncs, oldest first, without waiting for their acknowledgement; returns how many. */
    int sendQueued() {
        List<OffsetSync> all = takeQueued();
        all.forEach(this::send);
        return all.size();
    }

    /** Takes the emitted syncs, oldest first, instead of writing them ({@link OffsetSyncReplay}). */
    List<OffsetSync> takeQueued() {
        List<OffsetSync> taken = new ArrayList<>();
        outbox.drainTo(taken);
        return taken;
    }

    /** Writes {@code first} (if any) and the emitted syncs, but those a later one shows ({@link SyncBatch}). */
    int sendCoalesced(OffsetSync first) {
        List<OffsetSync> batch = first == null ? new ArrayList<>() : new ArrayList<>(List.of(first));
        outbox.drainTo(batch);
        List<OffsetSync> kept = SyncBatch.coalesced(batch);
        kept.forEach(this::send);
        progress.finished(batch.size() - kept.size());
        return kept.size();
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
        return progress.await(target, deadline);
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
            sendCoalesced(null);
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
                OffsetSync sync = outbox.poll(Math.max(0, nextFlush - System.nanoTime()), TimeUnit.NANOSECONDS);
                if (sync != null) {
                    try {  // one batch: a wake-up per sync (thousands a second in a backfill) took the records' cores
                        TimeUnit.MILLISECONDS.sleep(BATCH_MS);
                    } finally {
                        sendCoalesced(sync);  // also when close() interrupts: it writes what is left after this
                    }
                }
                if (System.nanoTime() - nextFlush >= 0) {
                    flushPending();
                    sendCoalesced(null);
                    nextFlush = System.nanoTime() + flushNanos;
                }
            }
        } catch (InterruptedException e) {
            // close() stops the thread
        }
    }

    private void enqueue(OffsetSync sync) {
        TargetTopicIds ids = targetIds;
        if (ids != null) {
            String id = ids.of(sync.source().topic());
            sync = sync.in(id == null ? UNSURE : id);
        }
        if (outbox.offer(sync)) {
            emitted++;
        } else {
            failed(new IllegalStateException(OUTBOX_CAPACITY + " offset syncs already waiting to be written"));
        }
    }

    private void send(OffsetSync sync) {
        try {
            producer.send(sync.toRecord(topic, writerId), (metadata, e) -> {
                if (e == null) {
                    stats.addSync();
                } else {
                    failed(e);
                }
                progress.finished(1);
            });
        } catch (RuntimeException e) {
            failed(e);
            progress.finished(1);
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
}
