package io.mirrord.sink;

import io.mirrord.source.Handed;
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

    /** The task's records come from {@code reader}'s polls (exactly once: they pace the commits, {@link CommitPace}). */
    default void reading(Handed reader) {
    }

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
     * that a stopping query interrupted (the open transaction was aborted, or the next start's fencing aborts it:
     * docs/decisions.md §12). Either way {@link #uninterrupted}.
     */
    static void close(Producer<?, ?> producer) {
        boolean interrupted = Thread.currentThread().isInterrupted();
        uninterrupted(() -> producer.close(interrupted ? Duration.ZERO : StreamSends.CLOSE_TIMEOUT));
    }

    /**
     * Runs a close with the thread's interrupt set aside, then set again. A query's stop interrupts its tasks, and a
     * task that closes its stream's producer then (its batch's flush interrupted, a failed send) had the close's
     * wait for the producer's I/O thread cut short: Kafka's "Interrupted while joining ioThread" as an ERROR in a
     * clean stop's journal, a clean-up that races the still running thread ("Unknown telemetry state: TERMINATED"),
     * and at least once the buffered records and delayed offset syncs left unwritten.
     */
    static void uninterrupted(Runnable close) {
        boolean interrupted = Thread.interrupted();
        try {
            close.run();
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
