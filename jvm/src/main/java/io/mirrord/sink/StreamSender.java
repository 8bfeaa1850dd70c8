package io.mirrord.sink;

import java.time.Duration;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.header.Headers;

/**
 * What {@link MirrorWriter} writes a stream's rows with, one producer of the stream's own: {@link StreamSends}
 * at least once, {@link StreamTransactions} exactly once. The JVM keeps it between the stream's tasks
 * ({@link StreamSenders}); one task uses it at a time.
 */
interface StreamSender extends AutoCloseable {
    /** The key {@link StreamSenders} keeps it under between tasks (exactly once: its transactional id). */
    String id();

    /** The stream's source partitions, each with its target topic named once. */
    SourcePartitions partitions();

    /** Sends one record of {@code source} at {@code offset}; {@code timestampMs} null: the producer's clock. */
    void send(SourcePartition source, long offset, Long timestampMs, byte[] key, byte[] value, Headers headers);

    /**
     * The task's batch ended (a micro-batch, or a real-time checkpoint interval): everything it sent is on the
     * target before Spark may commit the batch, else this throws and the task fails.
     */
    void taskEnded();

    /** The task failed: true if this sender may serve the stream's next task, else it was closed. */
    boolean taskFailed();

    /** Records sent and not yet acknowledged or failed. */
    long inFlight();

    /** Sends what is due by time (exactly once: a transaction {@code transaction.interval.ms} old). */
    default void tick() {
    }

    @Override
    void close();

    /**
     * Closes a transactional producer of the stream: within {@link StreamSends#CLOSE_TIMEOUT}, or at once in a task
     * that a stopping query interrupted. There a close waiting for the producer's I/O thread is cut short, with
     * Kafka's "Interrupted while joining ioThread" as an ERROR in a clean stop's journal, and its clean-up races the
     * still running thread ("Unknown telemetry state: TERMINATED"). So the interrupt is set aside while the producer
     * is forced closed and its thread joined, then set again. The open transaction was aborted, or the next start's
     * fencing aborts it (docs/decisions.md §12).
     */
    static void close(Producer<?, ?> producer) {
        boolean interrupted = Thread.interrupted();
        try {
            producer.close(interrupted ? Duration.ZERO : StreamSends.CLOSE_TIMEOUT);
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
