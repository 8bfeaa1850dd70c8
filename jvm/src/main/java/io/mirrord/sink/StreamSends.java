package io.mirrord.sink;

import io.mirrord.fencing.Fence;
import io.mirrord.fencing.FencedError;
import io.mirrord.log.WarnLimiter;
import io.mirrord.metrics.StageClock;
import io.mirrord.metrics.Stats;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.producer.BufferExhaustedException;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.header.Headers;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One stream's sends at least once: a producer of the stream's own (idempotent, {@code acks=all}), each
 * record's callback moving its source partition's position and feeding the offset syncs
 * ({@link SourcePartition#acknowledged}), which go out through the same producer. A task's end flushes and
 * fails the task if any send failed, so Spark never commits a batch past a record the target does not hold;
 * a failed send also fails the task's next one. The sender stays with the stream while no send failed: what it
 * still has in flight when a task fails or the query stops is delivered, and counts. No more record bytes await
 * acknowledgement than its {@link QueueBound} allows: a send past it waits for room first; a record the producer
 * refuses before appending it (a full pool, a topic's metadata not come) is sent again, in its place.
 */
final class StreamSends implements StreamSender {
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(5);
    /** How often the delayed offset syncs (the last record of a run so far) are written. */
    static final long SYNCS_FLUSH_MS = 1000;
    private static final long WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    private static final Logger log = LoggerFactory.getLogger(StreamSends.class);
    private final String id;
    private final Producer<byte[], byte[]> producer;
    private final OffsetSyncWriter syncs;  // null: no offset syncs
    private final SourcePartitions partitions;
    private volatile KafkaException failure;  // the first send that failed
    private final QueueBound bound;  // bytes of records awaiting acknowledgement before a send waits
    private final AtomicLong queued = new AtomicLong();
    private final AtomicLong acked = new AtomicLong();  // bytes of records acknowledged, for the bound's samples
    private final WarnLimiter poolFullLines = new WarnLimiter(60_000);  // at most a line a minute
    private final WarnLimiter refusedLines = new WarnLimiter(60_000);  // metadata not come: a line a minute
    private final WarnLimiter followedLines = new WarnLimiter(60_000);  // the bound under the fixed one: a line a minute

    /**
     * {@code syncsTopic} empty or null: no offset syncs; else they are written by a thread of their own
     * ({@code background}, every {@code flushMs} for the delayed ones) unless a test writes them.
     */
    StreamSends(String id, Producer<byte[], byte[]> producer, String syncsTopic, long offsetLagMax, long flushMs,
                Stats stats, String targetPrefix, boolean background) {
        this(id, producer, syncsTopic, offsetLagMax, flushMs, stats, targetPrefix, background,
                QueueBound.fixed(Long.MAX_VALUE));
    }

    /** {@code bound}: the bytes of records awaiting acknowledgement past which a send waits for room. */
    StreamSends(String id, Producer<byte[], byte[]> producer, String syncsTopic, long offsetLagMax, long flushMs,
                Stats stats, String targetPrefix, boolean background, QueueBound bound) {
        this.id = id;
        this.bound = bound;
        this.producer = producer;
        this.syncs = syncsTopic == null || syncsTopic.isEmpty() ? null
                : new OffsetSyncWriter(producer, syncsTopic, offsetLagMax, flushMs, stats, background);
        this.partitions = new SourcePartitions(targetPrefix, stats, syncs);
    }

    /** Its offset syncs name their target topics' incarnations (docs/decisions.md §7). */
    void nameTargetTopics(Map<String, ?> clientConfig, String targetPrefix) {
        if (syncs != null) {
            syncs.nameTargetTopics(clientConfig, targetPrefix);
        }
    }

    @Override
    public String id() {
        return id;
    }

    @Override
    public SourcePartitions partitions() {
        return partitions;
    }

    /** Throws the failure of an earlier send, and {@link FencedError} once this host's lease lapsed. */
    @Override
    public void send(SourcePartition source, long offset, Long timestampMs, byte[] key, byte[] value,
                     Headers headers) {
        admit(source);
        long bytes = length(key) + length(value);
        ProducerRecord<byte[], byte[]> record =
                new ProducerRecord<>(source.target, source.partition, timestampMs, key, value, headers);
        Delivery delivery = new Delivery(source, offset, source.incarnation.get(), bytes);
        source.sending(bytes);
        queued.addAndGet(bytes);
        if (bound.sample()) {
            delivery.ackedBefore = acked.get();
            delivery.sentNanos = System.nanoTime();
        }
        try {
            while (!appended(record, delivery)) {
                throwIfFailedOrFenced(source);  // while the pool stayed full (its bytes count already: no awaitRoom)
            }
        } catch (RuntimeException e) {  // refused, no callback to come (an interrupt): nothing sent, nothing failed
            source.notSent();
            queued.addAndGet(-bytes);
            throw e;
        }
    }

    /** Throws an earlier send's failure; waits for room in the bound; throws once the lease lapsed. */
    private void admit(SourcePartition source) {
        if (queued.get() > bound.get()) {
            awaitRoom();  // before the lease is looked at: it may lapse meanwhile
        }
        throwIfFailedOrFenced(source);
    }

    private void throwIfFailedOrFenced(SourcePartition source) {
        KafkaException failed = failure;
        if (failed != null) {
            throw failed;
        }
        if (!Fence.open()) {
            throw new FencedError("not sent to " + source.target + ": this host's lease lapsed (fenced)");
        }
    }

    /**
     * Whether the producer took the record. A pool ({@code buffer.memory}) that stayed full of batches for
     * {@code max.block.ms}, or a target topic or partition not in the producer's metadata within it (a first send to a
     * topic while the target is stalled), refuses the record before it is appended, in this thread: nothing was sent,
     * so the record is sent again, in its place, once the pool has room or the metadata came, not failed with a
     * restart after it (docs/decisions.md §2). {@code max.block.ms} bounds each try, so the lease is looked at between
     * them.
     */
    private boolean appended(ProducerRecord<byte[], byte[]> record, Delivery delivery) {
        delivery.sending = Thread.currentThread();
        try {
            producer.send(record, delivery);
        } finally {
            delivery.sending = null;
        }
        TimeoutException refused = delivery.refused;
        if (refused == null) {
            return true;
        }
        delivery.refused = null;
        if (refused instanceof BufferExhaustedException) {
            long held = poolFullLines.admit();
            if (held >= 0) {
                log.warn("{}: the producer's buffer.memory stayed full of batches for max.block.ms; the stream waits "
                        + "for the target's acknowledgements and sends on ({} more such waits since the last line; "
                        + "a larger buffer.memory or a smaller batch.size in producer.properties waits less)", id, held);
            }
        } else {
            long held = refusedLines.admit();
            if (held >= 0) {
                log.warn("{}: the producer refused a record before sending it ({}); the stream sends it again once the "
                        + "target answers ({} more such waits since the last line)", id, refused.getMessage(), held);
            }
        }
        LockSupport.parkNanos(WAIT_NANOS);  // a max.block.ms of 0 refuses at once: no busy loop
        if (Thread.currentThread().isInterrupted()) {
            throw new InterruptException("waiting to send a record the producer refused: " + refused.getMessage());
        }
        return false;
    }

    /**
     * Waits while more than the bound awaits acknowledgement: the records queued behind it would wait past their
     * delivery timeout (docs/decisions.md §2). Acknowledgements or failures end the wait within that timeout.
     */
    private void awaitRoom() {
        if (bound.followed()) {
            long held = followedLines.admit();
            if (held >= 0) {
                log.warn("{}: the target acknowledges slowly; the stream waits with {} KiB of records awaiting "
                        + "acknowledgement, what it acknowledges in a sixth of delivery.timeout.ms, and holds the rest "
                        + "in the source ({} more such waits since the last line; docs/decisions.md §2)", id,
                        bound.get() >> 10, held);
            }
        }
        while (queued.get() > bound.get() && failure == null) {
            LockSupport.parkNanos(WAIT_NANOS);
            if (Thread.currentThread().isInterrupted()) {  // the interrupt stays set for Spark to see
                throw new InterruptException("waiting for the target's acknowledgements");
            }
        }
        KafkaException failed = failure;
        if (failed != null) {
            throw failed;
        }
    }

    /** Bytes of records sent and not yet acknowledged or failed. */
    long queued() {
        return queued.get();
    }

    @Override
    public void taskEnded() {
        producer.flush();  // every record acknowledged or failed, and its callback run
        KafkaException failed = failure;
        if (failed != null) {
            throw failed;
        }
    }

    @Override
    public boolean taskFailed() {
        if (failure == null) {
            return true;
        }
        close();
        return false;
    }

    @Override
    public long inFlight() {
        return partitions.inFlight();
    }

    /** The syncs' writer, for tests. */
    OffsetSyncWriter syncs() {
        return syncs;
    }

    /**
     * Delivers what is buffered (at most {@link #CLOSE_TIMEOUT}), writes the delayed syncs, closes the producer; in a
     * task the query's stop interrupted too ({@link StreamSender#uninterrupted}).
     */
    @Override
    public void close() {
        StreamSender.uninterrupted(() -> {
            if (syncs != null) {
                syncs.close(CLOSE_TIMEOUT);  // closes the producer too
            } else {
                producer.close(CLOSE_TIMEOUT);
            }
        });
        partitions.release();
    }

    private static long length(byte[] bytes) {
        return bytes == null ? 0 : bytes.length;
    }

    /** A record's callback: what its acknowledgement or failure means, in the producer's I/O thread. */
    private final class Delivery implements Callback {
        private final SourcePartition source;
        private final long offset;
        private final long readIn;  // the incarnation the record was read in, when it was sent
        private final long bytes;
        private Thread sending;  // the thread in producer.send(record, this), while it is in it
        private TimeoutException refused;  // refused before the append, in the sending thread: nothing was sent
        private long ackedBefore;  // a timed record's: the stream's bytes acknowledged before it was sent
        private long sentNanos;  // and when (System.nanoTime): 0 for a record not timed

        Delivery(SourcePartition source, long offset, long readIn, long bytes) {
            this.source = source;
            this.offset = offset;
            this.readIn = readIn;
            this.bytes = bytes;
        }

        @Override
        public void onCompletion(RecordMetadata metadata, Exception exception) {
            if (exception instanceof TimeoutException t && sending == Thread.currentThread()) {
                refused = t;  // a full pool or no metadata within max.block.ms, before the append: sent again
                return;
            }
            long latencyMs = Stats.NO_LATENCY;
            if (exception != null) {
                Fence.guard();  // the I/O thread, before its turn's requests go out: a fenced JVM halts here
                if (failure == null) {
                    failure = new KafkaException("record " + offset + " of " + source.tp + " not delivered to "
                            + source.target + ": " + exception, exception);
                }
            } else if (metadata != null && metadata.hasTimestamp()) {
                latencyMs = System.currentTimeMillis() - metadata.timestamp();
                StageClock.reached(StageClock.ACKED, offset, metadata.timestamp());
            }
            long ackedNow = exception == null ? acked.addAndGet(bytes) : 0;
            if (exception == null && sentNanos != 0) {
                bound.acknowledged(ackedNow - ackedBefore, System.nanoTime() - sentNanos);
            }
            source.acknowledged(offset, readIn, metadata, exception, latencyMs, syncs);
            queued.addAndGet(-bytes);
        }
    }
}
