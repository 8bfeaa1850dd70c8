package io.mirrord.source;

import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * The record a task thread's reader last made a row of (docs/decisions.md §2, "A record's bytes, once"). Spark runs
 * a task's source, its projection and its writer in one thread, a row at a time, so when mirrord's writer takes a
 * row the record it came from is here: where no transform rewrote key or value, the writer sends the consumer's own
 * arrays instead of copying the row's bytes out again. The writer checks that the row is that record's (its topic,
 * partition and offset) and copies from the row otherwise.
 */
public final class Handed {
    private static final ThreadLocal<Handed> THREAD = ThreadLocal.withInitial(Handed::new);
    private ConsumerRecord<byte[], byte[]> record;

    private Handed() { }

    /** This thread's: looked up once per task by the reader and by the writer, not per record. */
    public static Handed onThisThread() {
        return THREAD.get();
    }

    void made(ConsumerRecord<byte[], byte[]> last) {
        record = last;
    }

    /** The record whose row this thread's reader made last, or null. */
    public ConsumerRecord<byte[], byte[]> last() {
        return record;
    }

    /** The reader's task is over: no row of its will come. */
    void clear() {
        record = null;
    }
}
