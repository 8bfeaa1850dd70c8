package io.mirrord.sink;

import io.mirrord.fencing.Fence;
import io.mirrord.fencing.FencedError;
import io.mirrord.log.HoldPoint;
import io.mirrord.metrics.Stats;
import io.mirrord.source.Handed;

import java.util.LinkedHashMap;
import java.util.Map;
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
 * ({@link #earlier}): a task run again from its batch's start skips what they copied. A transaction is committed
 * once it is due ({@link CommitPace}: by the stream's task or by a timer while the task waits for records), and at
 * the end of each Spark task. Only a committed transaction counts: the records' metrics and the acknowledged
 * positions (which the positions' owner commits to the source group for the lag tools) move at commit.
 *
 * <p>Locking: the task's thread sends and the timer commits, both holding this object's monitor. The producer's
 * callbacks (its I/O thread) take no lock of ours: a commit holds the monitor while it waits for them.
 */
final class StreamTransactions implements StreamSender {
    private static final Logger log = LoggerFactory.getLogger(StreamTransactions.class);
    private final Producer<byte[], byte[]> producer;
    final String id;
    private final String positionsTopic;
    private final OffsetSyncWriter syncs;  // null: no offset syncs
    private final Stats stats;
    /** What the stream's earlier owners committed; the task's thread only (handed over with this object). */
    final CommittedPositions earlier;
    private final Map<TopicPartition, PendingPosition> pending = new LinkedHashMap<>();  // in the open transaction
    private final SourcePartitions sources;
    final CommitPace pace;  // the tests drive its reader
    private final CommitWait commits = new CommitWait(Fence::open, () -> System.nanoTime() / 1_000_000);
    private boolean open;
    private volatile RuntimeException failure;  // the first failed send of the open transaction
    private boolean closed;
    private long committed;  // transactions committed

    /** {@code committed}: reads the positions the stream's earlier owners committed, once they are fenced. */
    StreamTransactions(Producer<byte[], byte[]> producer, String id, String positionsTopic, String syncsTopic,
                       long offsetLagMax, long intervalMs, Stats stats, String targetPrefix, LongSupplier clock,
                       Supplier<CommittedPositions> committed) {
        this.producer = producer;
        this.id = id;
        this.positionsTopic = positionsTopic;
        this.stats = stats;
        this.pace = new CommitPace(intervalMs, clock);
        this.syncs = syncsTopic == null || syncsTopic.isEmpty() ? null
                : new OffsetSyncWriter(producer, syncsTopic, offsetLagMax, 0, stats, false);
        this.sources = new SourcePartitions(targetPrefix, stats, syncs);
        try {
            producer.initTransactions();  // fences every earlier producer of this id, aborting its open transaction
            HoldPoint.reach("init");
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            throw fenced(e);
        }
        this.earlier = committed.get();  // only now: no earlier producer of the stream can commit any more
    }

    @Override
    public String id() {
        return id;
    }

    @Override
    public SourcePartitions partitions() {
        return sources;
    }

    @Override
    public synchronized void reading(Handed reader) {
        pace.reading(reader::polls, reader::dryPolls);
    }

    /** A record sent in the open transaction (begun if none is) unless earlier owners committed it; commits if due. */
    @Override
    public synchronized void send(SourcePartition s, long sourceOffset, Long timestampMs, byte[] key, byte[] value,
                                  Headers headers) {
        if (earlier.copied(s.tp, sourceOffset)) {
            return;
        }
        RuntimeException failed = failure;
        if (failed != null) {
            throw failed;
        }
        if (!Fence.open()) {
            throw new FencedError("not sent to " + s.target + ": this host's lease lapsed (fenced)");
        }
        if (!open) {
            begin();
        }
        long now = pace.now();
        pending.computeIfAbsent(s.tp, tp -> new PendingPosition(s)).add(sourceOffset, timestampMs == null ? -1
                : timestampMs, (key == null ? 0 : key.length) + (value == null ? 0 : value.length));
        try {
            producer.send(new ProducerRecord<>(s.target, s.partition, timestampMs, key, value, headers), (metadata, e) -> {
                if (e != null) {
                    remember(e instanceof ProducerFencedException || e instanceof InvalidProducerEpochException
                            ? fenced((RuntimeException) e)
                            : new TransactionFailed("a record for " + s.target + " failed in transaction of " + id
                                    + ": " + e, e));
                } else if (syncs != null && metadata.hasOffset()) {
                    syncs.acked(s.syncs, sourceOffset, metadata.offset());
                }
            });
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            throw remember(fenced(e));
        } catch (IllegalStateException | KafkaException e) {  // the producer's transaction is in error already
            throw remember(new TransactionFailed("a record for " + s.target + " not sent in transaction of " + id
                    + ": " + e, e));
        }
        HoldPoint.reach("open");
        commitIfDue(now);
    }

    /** The task's batch ended: its last transaction commits; one that cannot is aborted, and this throws. */
    @Override
    public void taskEnded() {
        logSkipped();
        try {
            HoldPoint.reach("boundary");
            commit();
        } catch (RuntimeException e) {
            abortQuietly();
            throw e;
        }
    }

    /** The task failed: the open transaction is aborted (the stream's next owner copies it again), and closed. */
    @Override
    public boolean taskFailed() {
        logSkipped();
        abortQuietly();
        close();
        return false;
    }

    @Override
    public long inFlight() {
        return 0;  // a transaction's records count at its commit, never later
    }

    @Override
    public void tick() {
        commitIfDue();
    }

    private void logSkipped() {
        long skipped = earlier.takeSkipped();
        if (skipped > 0) {
            log.warn("transactional id {}: {} records of this batch were committed by an earlier attempt of its task, "
                    + "not copied again", id, skipped);
        }
    }
    private void abortQuietly() {
        try {
            abort();
        } catch (RuntimeException e) {
            log.debug("abort of {} failed: {}", id, e.toString());
        }
    }

    /** Commits the open transaction if it is due ({@link CommitPace}; the timer's and the task's check). */
    synchronized void commitIfDue() {
        commitIfDue(pace.now());
    }

    private void commitIfDue(long now) {
        if (open && !closed && failure == null && pace.due(now)) {
            commit();
        }
    }

    /** Commits the open transaction, if any: its records acknowledged, then their syncs and positions; or throws. */
    synchronized void commit() {
        if (!open) {
            return;
        }
        pace.committing();
        try {
            producer.flush();  // every record acknowledged or failed, and its callback run
            RuntimeException failed = failure;
            if (failed != null) {
                throw failed;
            }
            if (!Fence.open()) {
                throw new FencedError("transaction of " + id + " not committed: this host's lease lapsed (fenced)");
            }
            if (syncs != null) {  // each run's last sync, in the transaction of its records (docs/decisions.md §12)
                syncs.flushPending();
                syncs.sendCoalesced(null);
            }
            for (PendingPosition p : pending.values()) {
                producer.send(new ProducerRecord<>(positionsTopic, null, CommittedPositions.key(p.source.tp),
                        CommittedPositions.value(p.next, p.topicId)));
            }
            HoldPoint.reach("commit");
            commits.commit(producer, id);  // a commit that timed out is asked again while the lease holds
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            throw remember(fenced(e));
        } catch (TransactionFailed e) {
            throw remember(e);
        } catch (RuntimeException e) {  // an abortable error (a record refused, a broker's error)
            throw remember(new TransactionFailed("transaction of " + id + " not committed: " + e, e));
        }
        long now = System.currentTimeMillis();
        for (PendingPosition p : pending.values()) {
            p.counted(now);
        }
        pending.clear();
        open = false;
        pace.committed();
        committed++;
        stats.transactionCommitted(pace.lastLastedMs(), pace.lastCommitMs());
    }

    /** Aborts the open transaction (its records are copied again by the next owner of the stream). */
    synchronized void abort() {
        if (open) {
            pending.clear();
            open = false;
            if (syncs != null) {
                syncs.takeQueued();
                sources.forEach(s -> syncs.reset(s.syncs));
            }
            stats.transactionAborted();
            producer.abortTransaction();
        }
        failure = null;
    }

    /** The open transaction cannot commit: later sends and commits fail with the first {@code e} until it aborts. */
    private RuntimeException remember(RuntimeException e) {
        if (failure == null) {
            failure = e;
        }
        return e;
    }

    synchronized long committed() {  // for tests
        return committed;
    }

    synchronized boolean isOpen() {  // records sent, not committed
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
        if (closed) {
            return;
        }
        closed = true;
        if (syncs != null) {
            syncs.releaseTargetTopics();
        }
        sources.release();
        StreamSender.close(producer);
    }

    private void begin() {
        try {
            producer.beginTransaction();
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            throw fenced(e);
        }
        open = true;
        pace.begun();
        failure = null;
    }

    private RuntimeException fenced(RuntimeException e) {
        String why = "transactional id " + id + " was fenced: a newer owner of this stream (another host, or a "
                + "restart) writes it now";
        log.warn("{} ({})", why, e.toString());
        return new TransactionFailed(why, e);
    }
}
