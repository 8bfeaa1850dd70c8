package io.mirrord.sink;

import io.mirrord.fencing.Fence;
import io.mirrord.fencing.FencedError;
import io.mirrord.metrics.Stats;
import io.mirrord.positions.Incarnations;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.header.Headers;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One stream's transactions on the target (docs/decisions.md §12, exactly once): a transactional producer
 * whose id belongs to the stream, and in each transaction the records copied, the source positions they
 * reach (in the flow's positions topic: {@link CommittedPositions}) and the offset syncs that pair them. Its
 * {@code initTransactions} fences the stream's earlier producers, then it reads the positions they committed
 * ({@link #earlier}): a task run again from its batch's start skips what they copied. A transaction is committed once it is {@code intervalMs} old (by the
 * stream's task or by a timer while the task waits for records), and at the end of each Spark task. Only
 * a committed transaction counts: the records' metrics and the acknowledged positions (which the
 * positions' owner commits to the source group for the lag tools) move at commit.
 *
 * <p>Locking: the task's thread sends and the timer commits, both holding this object's monitor. The
 * producer's callbacks (its I/O thread) take no lock of ours: a commit holds the monitor while it waits
 * for them ({@code flush}).
 */
final class StreamTransactions implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(StreamTransactions.class);
    private final Producer<byte[], byte[]> producer;
    final String id;
    private final String positionsTopic;
    private final OffsetSyncWriter syncs;  // null: no offset syncs
    private final long intervalMs;
    private final Stats stats;
    private final LongSupplier clock;
    /** What the stream's earlier owners committed; the task's thread only (handed over with this object). */
    final CommittedPositions earlier;
    private final Map<TopicPartition, Pending> pending = new LinkedHashMap<>();  // in the open transaction
    private final Map<TopicPartition, Source> sources = new HashMap<>();
    private boolean open;
    private long begunAt;
    private volatile RuntimeException failure;  // the first failed send of the open transaction
    private boolean closed;
    private long committed;  // transactions committed, for tests and the log

    /** {@code committed}: reads the positions the stream's earlier owners committed, once they are fenced. */
    StreamTransactions(Producer<byte[], byte[]> producer, String id, String positionsTopic, String syncsTopic,
                       long offsetLagMax, long intervalMs, Stats stats, LongSupplier clock,
                       Supplier<CommittedPositions> committed) {
        this.producer = producer;
        this.id = id;
        this.positionsTopic = positionsTopic;
        this.intervalMs = intervalMs;
        this.stats = stats;
        this.clock = clock;
        this.syncs = syncsTopic == null || syncsTopic.isEmpty() ? null
                : new OffsetSyncWriter(producer, syncsTopic, offsetLagMax, 0, stats, false);
        try {
            producer.initTransactions();  // fences every earlier producer of this id, aborting its open transaction
            HoldPoint.reach("init");
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            throw fenced(e);
        }
        this.earlier = committed.get();  // only now: no earlier producer of the stream can commit any more
    }

    /** One record of {@code source} at {@code sourceOffset}, sent in the open transaction (begun if none is). */
    synchronized void send(TopicPartition source, long sourceOffset, String targetTopic, Integer partition,
                           Long timestampMs, byte[] key, byte[] value, Headers headers) {
        RuntimeException failed = failure;
        if (failed != null) {
            throw failed;
        }
        if (!Fence.open()) {
            throw new FencedError("not sent to " + targetTopic + ": this host's lease lapsed (fenced)");
        }
        if (!open) {
            begin();
        }
        Source s = sources.computeIfAbsent(source, tp -> new Source(tp, targetTopic));
        pending.computeIfAbsent(source, tp -> new Pending(s)).add(sourceOffset, timestampMs == null ? -1 : timestampMs);
        synchronized (s.tally) {
            s.tally.sent((key == null ? 0 : key.length) + (value == null ? 0 : value.length));
        }
        ProducerRecord<byte[], byte[]> record =
                new ProducerRecord<>(s.target, partition, timestampMs, key, value, headers);
        try {
            producer.send(record, (metadata, e) -> {
                if (e != null) {
                    remember(e instanceof ProducerFencedException || e instanceof InvalidProducerEpochException
                            ? fenced((RuntimeException) e)
                            : new TransactionFailed("a record for " + s.target + " failed in transaction of " + id
                                    + ": " + e, e));
                } else if (syncs != null && metadata.hasOffset()) {
                    syncs.acked(s.syncState, sourceOffset, metadata.offset());
                }
            });
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            throw remember(fenced(e));
        } catch (IllegalStateException | KafkaException e) {  // the producer's transaction is in error already
            throw remember(new TransactionFailed("a record for " + s.target + " not sent in transaction of " + id
                    + ": " + e, e));
        }
    }

    /** Commits the open transaction if it is {@code intervalMs} old (the timer's and the task's check). */
    synchronized void commitIfDue() {
        if (open && !closed && failure == null && clock.getAsLong() - begunAt >= intervalMs) {
            commit();
        }
    }

    /**
     * Commits the open transaction, if any: waits for its records, writes the offset syncs they made and the
     * positions they reach, and commits; then counts them. A failed record aborts it and throws.
     */
    synchronized void commit() {
        if (!open) {
            return;
        }
        try {
            producer.flush();  // every record acknowledged or failed, and its callback run
            RuntimeException failed = failure;
            if (failed != null) {
                throw failed;
            }
            if (!Fence.open()) {
                throw new FencedError("transaction of " + id + " not committed: this host's lease lapsed (fenced)");
            }
            if (syncs != null) {
                // each run's last sync, in the transaction that holds its records: a marker follows them, so the
                // partition's next record starts a new run and would emit it anyway, but only if it comes, and
                // in a transaction that may abort (docs/decisions.md §12)
                syncs.flushPending();
                syncs.sendQueued();
            }
            for (Pending p : pending.values()) {
                producer.send(new ProducerRecord<>(positionsTopic, null, CommittedPositions.key(p.source.tp),
                        CommittedPositions.value(p.next, p.topicId)));
            }
            HoldPoint.reach("commit");
            producer.commitTransaction();
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            throw remember(fenced(e));
        } catch (TransactionFailed e) {
            throw remember(e);
        } catch (RuntimeException e) {  // a commit that timed out (a broker bounced), an abortable error
            throw remember(new TransactionFailed("transaction of " + id + " not committed: " + e, e));
        }
        long now = System.currentTimeMillis();
        for (Pending p : pending.values()) {
            p.counted(now);
        }
        pending.clear();
        open = false;
        committed++;
        stats.addTransaction(true);
    }

    /** Aborts the open transaction (its records are copied again by the next owner of the stream). */
    synchronized void abort() {
        if (open) {
            pending.clear();
            open = false;
            if (syncs != null) {
                syncs.takeQueued();
                sources.values().forEach(s -> syncs.reset(s.syncState));
            }
            stats.addTransaction(false);
            producer.abortTransaction();
        }
        failure = null;
    }

    /**
     * The open transaction cannot commit: every later send and commit fails with the first such {@code e} until
     * it is aborted (a timed commit's failure included: the task's next send, or its end, fails with it).
     */
    private RuntimeException remember(RuntimeException e) {
        if (failure == null) {
            failure = e;
        }
        return e;
    }

    synchronized long committed() {
        return committed;
    }

    /** Whether a transaction is open (records sent, not committed). */
    synchronized boolean isOpen() {
        return open;
    }

    /** Its offset syncs name their target topics' incarnations (docs/decisions.md §7). */
    void nameTargetTopics(Map<String, ?> clientConfig, String targetPrefix) {
        if (syncs != null) {
            syncs.nameTargetTopics(clientConfig, targetPrefix);
        }
    }

    @Override
    public synchronized void close() {
        closed = true;
        if (syncs != null) {
            syncs.releaseTargetTopics();
        }
        for (Source s : sources.values()) {
            stats.release(s.tally);
        }
        producer.close(Duration.ofSeconds(5));
    }

    private void begin() {
        try {
            producer.beginTransaction();
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            throw fenced(e);
        }
        open = true;
        begunAt = clock.getAsLong();
        failure = null;
    }

    private RuntimeException fenced(RuntimeException e) {
        String why = "transactional id " + id + " was fenced: a newer owner of this stream (another host, or a "
                + "restart) writes it now";
        log.warn("{} ({})", why, e.toString());
        return new TransactionFailed(why, e);
    }

    /** A transaction that could not commit; the query fails and the next start resumes from the target. */
    static final class TransactionFailed extends RuntimeException {
        private static final long serialVersionUID = 1L;

        TransactionFailed(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** A source partition this stream copied: its target topic, metrics and offset-sync rules. */
    private final class Source {
        final TopicPartition tp;
        final String target;
        final Stats.Tally tally;
        final AtomicLong incarnation;
        final AtomicReference<String> topicId;
        final SyncRuns syncState;

        Source(TopicPartition tp, String target) {
            this.tp = tp;
            this.target = target;
            this.tally = stats.tally(target, tp.topic(), tp.partition());
            this.incarnation = Incarnations.of(tp.topic(), tp.partition());
            this.topicId = Incarnations.topicIdOf(tp.topic());
            this.syncState = syncs == null ? null : syncs.state(tp);
        }
    }

    /** What the open transaction holds of one source partition. */
    private static final class Pending {
        final Source source;
        long next = -1;
        long incarnation;
        String topicId;  // of the source topic the records were read from; null: not known
        long[] timestamps = new long[16];
        int count;

        Pending(Source source) {
            this.source = source;
        }

        void add(long sourceOffset, long timestampMs) {
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
}
