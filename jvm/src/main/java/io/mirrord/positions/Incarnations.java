package io.mirrord.positions;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.common.TopicPartition;

/**
 * The executor's side of a source partition's incarnation (docs/decisions.md §10): the number the driver's
 * {@link Positions} gave the partition when it planned the batch being read, set by the source's reader
 * before it hands out a record, read by mirrord's writer as each record is sent, so that every
 * acknowledgement names the incarnation of the record it acknowledges. {@link #UNKNOWN} (a partition a
 * reader found or saw rewind on its own, mid-batch): acknowledgements the driver does not count. Beside it, each
 * source topic's id as the driver knew it when it planned the batch (null: not known yet), which exactly once
 * writes with the positions it commits.
 */
public final class Incarnations {
    public static final long UNKNOWN = -1;
    private static final Map<TopicPartition, AtomicLong> CURRENT = new ConcurrentHashMap<>();
    private static final Map<String, AtomicReference<String>> TOPIC_IDS = new ConcurrentHashMap<>();

    private Incarnations() {
    }

    /** The holder of a partition's incarnation, kept by the writer per source partition (no lookup per record). */
    public static AtomicLong of(String topic, int partition) {
        return CURRENT.computeIfAbsent(new TopicPartition(topic, partition), tp -> new AtomicLong(UNKNOWN));
    }

    public static void set(TopicPartition tp, long incarnation) {
        of(tp.topic(), tp.partition()).set(incarnation);
    }

    /** The holder of a source topic's id, kept by the transactional writer (no lookup per record). */
    public static AtomicReference<String> topicIdOf(String topic) {
        return TOPIC_IDS.computeIfAbsent(topic, t -> new AtomicReference<>());
    }

    public static void setTopicId(String topic, String id) {
        topicIdOf(topic).set(id);
    }
}
