package io.mirrord.source;

import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;

/**
 * A stream's look at the source's topics from its own consumer, in the middle of a batch: which partitions
 * that match are gone, and, in real-time mode, which of this stream's ({@link Assignment}) appeared. A new
 * partition is taken up once it was seen at two looks running (the supervisor creates the target topic in
 * between).
 */
final class TopicLook {
    private static final Duration ASK_TIMEOUT = Duration.ofSeconds(1);

    /** What changed since the last look: partitions to take up, and partitions gone from the source. */
    record Change(Set<TopicPartition> ready, Set<TopicPartition> gone) {
        boolean none() {
            return ready.isEmpty() && gone.isEmpty();
        }
    }

    private final KafkaConsumer<byte[], byte[]> consumer;
    private final SourceOptions options;
    private final int stream;
    private Set<TopicPartition> seenOnce = Set.of();

    TopicLook(KafkaConsumer<byte[], byte[]> consumer, SourceOptions options, int stream) {
        this.consumer = consumer;
        this.options = options;
        this.stream = stream;
    }

    /** The partitions of the topics that match, or null when the source does not answer now. */
    Set<TopicPartition> existing() {
        try {
            return SourceMetadata.matching(consumer.listTopics(ASK_TIMEOUT).values(), options);
        } catch (TimeoutException e) {
            return null;
        }
    }

    /** Real-time mode: the partitions of this stream that appeared (at two looks running), those assigned gone. */
    Change change(Set<TopicPartition> assigned) {
        Set<TopicPartition> existing = existing();
        if (existing == null) {
            return new Change(Set.of(), Set.of());  // look again later
        }
        Set<TopicPartition> mine = new HashSet<>();
        for (TopicPartition tp : existing) {
            if (Assignment.streamOf(tp, options.streams) == stream) {
                mine.add(tp);
            }
        }
        Set<TopicPartition> fresh = new HashSet<>(mine);
        fresh.removeAll(assigned);
        Set<TopicPartition> gone = new HashSet<>(assigned);
        gone.removeAll(mine);
        Set<TopicPartition> ready = new HashSet<>(fresh);
        ready.retainAll(seenOnce);
        seenOnce = fresh;
        return new Change(ready, gone);
    }
}
