package io.mirrord.sink;

import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * One interceptor's {@link Pairing}s by target topic and partition, each made on first use; a lookup of one
 * that exists allocates nothing and, for the topic the last lookup named, hashes nothing (per-record path).
 */
final class Pairings {
    /** Makes the pairing of a target partition; {@code topic} is the name the first record gave the topic. */
    interface Factory {
        Pairing make(String topic, int partition);
    }

    private final Factory factory;
    private final Map<String, Partitions> byTopic = new ConcurrentHashMap<>();
    private volatile Partitions last;  // the target topic of the last lookup: most records go where the last one went

    Pairings(Factory factory) {
        this.factory = factory;
    }

    /** The pairing of a target partition, made on first use. */
    Pairing of(String topic, int partition) {
        Pairing pairing = existing(topic, partition);
        return pairing != null ? pairing : created(topic, partition);
    }

    /** The pairing of a target partition, null if no record was sent to it. */
    Pairing existing(String topic, int partition) {
        Partitions partitions = last;
        if (partitions == null || !partitions.topic.equals(topic)) {  // equals: cheaper than the hash of a new String
            partitions = byTopic.get(topic);
            if (partitions == null) {
                return null;
            }
            last = partitions;
        }
        Pairing[] array = partitions.pairings;
        return partition < array.length ? array[partition] : null;
    }

    private synchronized Pairing created(String topic, int partition) {
        Partitions partitions = byTopic.computeIfAbsent(topic, Partitions::new);
        Pairing[] array = partitions.pairings;
        if (partition < array.length && array[partition] != null) {
            return array[partition];
        }
        Pairing[] grown = Arrays.copyOf(array, Math.max(array.length, partition + 1));
        grown[partition] = factory.make(partitions.topic, partition);
        partitions.pairings = grown;  // a new array each time: readers never see one being filled
        return grown[partition];
    }

    void forEach(Consumer<Pairing> action) {
        for (Partitions partitions : byTopic.values()) {
            for (Pairing pairing : partitions.pairings) {
                if (pairing != null) {
                    action.accept(pairing);
                }
            }
        }
    }

    /** One target topic's pairings by partition, under the name the first record gave it. */
    private static final class Partitions {
        final String topic;
        volatile Pairing[] pairings = new Pairing[0];

        Partitions(String topic) {
            this.topic = topic;
        }
    }
}
