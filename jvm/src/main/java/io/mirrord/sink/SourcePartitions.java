package io.mirrord.sink;

import io.mirrord.metrics.Stats;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A stream's {@link SourcePartition}s by source topic and partition, each made on first use with its target
 * topic's name (the policy's prefix and the source topic's), made once: no topic {@code String} is built per
 * record. A lookup of one that exists allocates nothing and, for the topic the last lookup named, hashes
 * nothing ({@code equals} is cheaper than a hash); a row's topic as its bytes is not even made a {@code String}.
 */
final class SourcePartitions {
    private final String targetPrefix;
    private final Stats stats;
    private final OffsetSyncWriter syncs;  // null: no offset syncs
    private final Map<String, Topic> byTopic = new ConcurrentHashMap<>();
    private volatile Topic last;  // most records come from the topic the last one came from

    SourcePartitions(String targetPrefix, Stats stats, OffsetSyncWriter syncs) {
        this.targetPrefix = targetPrefix == null ? "" : targetPrefix;
        this.stats = stats;
        this.syncs = syncs;
    }

    /** The source partition {@code partition} of {@code topic}, made on first use. */
    SourcePartition of(String topic, int partition) {
        Topic t = last;
        if (t == null || !t.name.equals(topic)) {
            t = byTopic.get(topic);
            if (t == null) {
                t = byTopic.computeIfAbsent(topic, Topic::new);
            }
            last = t;
        }
        return in(t, partition);
    }

    /**
     * The same, for a topic name as the row holds it: compared with the last topic's bytes, made a {@code String}
     * only when the topic changes.
     */
    SourcePartition of(UTF8String topic, int partition) {
        Topic t = last;
        if (t == null || !t.utf8.equals(topic)) {
            return of(topic.toString(), partition);
        }
        return in(t, partition);
    }

    private SourcePartition in(Topic t, int partition) {
        SourcePartition[] array = t.partitions;
        SourcePartition found = partition < array.length ? array[partition] : null;
        return found != null ? found : created(t, partition);
    }

    private synchronized SourcePartition created(Topic t, int partition) {
        SourcePartition[] array = t.partitions;
        if (partition < array.length && array[partition] != null) {
            return array[partition];
        }
        TopicPartition tp = new TopicPartition(t.name, partition);
        SourcePartition made = new SourcePartition(tp, t.target, stats, syncs == null ? null : syncs.state(tp));
        SourcePartition[] grown = Arrays.copyOf(array, Math.max(array.length, partition + 1));
        grown[partition] = made;
        t.partitions = grown;  // a new array each time: readers never see one being filled
        return made;
    }

    void forEach(Consumer<SourcePartition> action) {
        for (Topic t : byTopic.values()) {
            for (SourcePartition p : t.partitions) {
                if (p != null) {
                    action.accept(p);
                }
            }
        }
    }

    /** Records sent to the target and not yet acknowledged or failed. */
    long inFlight() {
        long[] total = {0};
        forEach(p -> total[0] += p.inFlight());
        return total[0];
    }

    /** Counts what every tally holds and lets the stats forget them (the stream's sender closed). */
    void release() {
        forEach(p -> stats.release(p.tally));
    }

    /** One source topic: its name, its target topic's, its partitions. */
    private final class Topic {
        final String name;
        final String target;
        final UTF8String utf8;
        volatile SourcePartition[] partitions = new SourcePartition[0];

        Topic(String name) {
            this.name = name;
            this.utf8 = UTF8String.fromString(name);
            this.target = targetPrefix.isEmpty() ? name : targetPrefix + name;
        }
    }
}
