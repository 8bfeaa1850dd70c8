package io.mirrord.source;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.common.TopicPartition;

/**
 * The source topics whose copy the supervisor made on the target, with how many partitions the copy has: told
 * through py4j ({@link #exist}) after each creation or growth. A real-time stream takes a new partition up at its
 * first look when its copy exists, and looks again every {@value #WAITING_LOOK_MS} ms while a partition it saw
 * waits for its copy ({@link TopicLook}, docs/decisions.md §9). The supervisor runs in the driver's JVM, which in
 * local mode runs the streams too; a cluster's executor is never told, and keeps the rule of a partition seen at
 * two looks {@code topic.refresh.ms} apart (the supervisor creates the copy in between). Static, because the
 * supervisor has no handle on the streams' consumers; copies are never deleted by mirrord, so nothing is
 * forgotten.
 */
public final class TargetCopies {
    static final long WAITING_LOOK_MS = 1_000;
    private static final Map<String, Integer> PARTITIONS = new ConcurrentHashMap<>();
    private static volatile boolean told;

    private TargetCopies() {
    }

    /** The supervisor (py4j): these source topics' copies exist on the target, with at least these partitions. */
    public static void exist(Map<String, Integer> partitions) {
        partitions.forEach((topic, count) -> PARTITIONS.merge(topic, count, Math::max));
        told = true;
    }

    /** Whether the copy of {@code tp} is known to exist on the target. */
    static boolean has(TopicPartition tp) {
        return PARTITIONS.getOrDefault(tp.topic(), 0) > tp.partition();
    }

    /** Whether the supervisor tells this JVM of the copies it makes (local mode). */
    static boolean told() {
        return told;
    }

    static void forget() {  // for tests
        PARTITIONS.clear();
        told = false;
    }
}
