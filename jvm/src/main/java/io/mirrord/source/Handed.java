package io.mirrord.source;

import java.time.Duration;
import java.util.OptionalLong;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.TopicPartition;

/**
 * The record a task thread's reader last made a row of (docs/decisions.md §2, "A record's bytes, once"). Spark runs
 * a task's source, its projection and its writer in one thread, a row at a time, so when mirrord's writer takes a
 * row the record it came from is here: where no transform rewrote key or value, the writer sends the consumer's own
 * arrays instead of copying the row's bytes out again. The writer checks that the row is that record's (its topic,
 * partition and offset) and copies from the row otherwise.
 *
 * <p>It also counts the reader's polls, and those that found the source dry: fewer records than a poll may, and
 * none left at the source of the partitions it returned (their lag, from the fetch's high watermark or last stable
 * offset, is 0), so the stream keeps up with it. A poll that returns all it may, or whose partitions the source
 * holds more of, found a backlog: records of 1 KiB fill a partition's fetch ({@code max.partition.fetch.bytes}) with
 * fewer records than a poll may return, so in a backlog of them polls come back short with more ready. Exactly once,
 * the writer's commits follow that (docs/decisions.md §12, a commit's pace); the timer that commits while the task
 * waits reads it.
 */
public final class Handed {
    private static final ThreadLocal<Handed> THREAD = ThreadLocal.withInitial(Handed::new);
    private ConsumerRecord<byte[], byte[]> record;
    private volatile long polls;
    private volatile long dryOnes;

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

    /**
     * The reader's poll of {@code consumer}, counted: dry if it returned fewer than {@code most} records and the
     * source had no more of their partitions.
     */
    ConsumerRecords<byte[], byte[]> poll(Consumer<byte[], byte[]> consumer, long timeoutMs, int most) {
        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(timeoutMs));
        if (records.count() < most && drained(consumer, records)) {
            dryOnes++;  // this thread's only: the volatile is for the timer's reads
        }
        polls++;
        return records;
    }

    /** Whether the source had nothing more of the partitions {@code records} came from (known from their fetch). */
    private static boolean drained(Consumer<byte[], byte[]> consumer, ConsumerRecords<byte[], byte[]> records) {
        for (TopicPartition tp : records.partitions()) {
            OptionalLong lag = consumer.currentLag(tp);
            if (lag.isPresent() && lag.getAsLong() > 0) {
                return false;
            }
        }
        return true;
    }

    /** The polls this thread's readers made. */
    public long polls() {
        return polls;
    }

    /** Those that found the source dry: fewer records than they might, and no more of their partitions. */
    public long dryPolls() {
        return dryOnes;
    }

    /** The reader's task is over: no row of its will come. */
    void clear() {
        record = null;
    }
}
