package io.mirrord.positions;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.TopicPartition;

/**
 * The executor's side of a source partition's incarnation (docs/decisions.md §10): the number the driver's
 * {@link Positions} gave the partition when it planned the batch being read, set by the source's reader
 * before it hands out a record, read by the producer interceptor as each record is sent, so that every
 * acknowledgement names the incarnation of the record it acknowledges. {@link #UNKNOWN} (a partition a
 * reader found or saw rewind on its own, mid-batch): acknowledgements the driver does not count.
 */
public final class Incarnations {
    public static final long UNKNOWN = -1;
    private static final Map<TopicPartition, AtomicLong> CURRENT = new ConcurrentHashMap<>();

    private Incarnations() {
    }

    /** The holder of a partition's incarnation, kept by the interceptor's pairing (no lookup per record). */
    public static AtomicLong of(String topic, int partition) {
        return CURRENT.computeIfAbsent(new TopicPartition(topic, partition), tp -> new AtomicLong(UNKNOWN));
    }

    public static void set(TopicPartition tp, long incarnation) {
        of(tp.topic(), tp.partition()).set(incarnation);
    }
}
