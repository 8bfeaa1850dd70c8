package io.mirrord.source;

import io.mirrord.metrics.Stats;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A stream's look at the source's topics from its own consumer, in the middle of a batch: which partitions
 * that match are gone, and, in real-time mode, which of this stream's ({@link Assignment}) appeared. A new
 * partition is taken up once its topic's copy exists on the target ({@link TargetCopies}, local mode), or once it
 * was seen at looks {@code topic.refresh.ms} apart (the supervisor creates the copy in between). A partition gone is
 * {@link #lost} from where the stream stopped handing it out.
 */
final class TopicLook {
    private static final Logger log = LoggerFactory.getLogger(TopicLook.class);
    static final Duration ASK_TIMEOUT = Duration.ofSeconds(1);

    /** What changed since the last look: partitions to take up, and partitions gone from the source. */
    record Change(Set<TopicPartition> ready, Set<TopicPartition> gone) {
        boolean none() {
            return ready.isEmpty() && gone.isEmpty();
        }
    }

    private final Consumer<byte[], byte[]> consumer;
    private final SourceOptions options;
    private final int stream;
    private Map<TopicPartition, Long> waiting = Map.of();  // new partitions not taken up, and when first seen

    TopicLook(Consumer<byte[], byte[]> consumer, SourceOptions options, int stream) {
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

    /**
     * Real-time mode, looking at {@code now}: the partitions of this stream that appeared and may be taken up (their
     * target copy exists, or they were first seen {@code topic.refresh.ms} ago and at every look since), those
     * assigned gone.
     */
    Change change(Set<TopicPartition> assigned, long now) {
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
        Set<TopicPartition> ready = new HashSet<>();
        Map<TopicPartition, Long> seen = new HashMap<>();
        for (TopicPartition tp : mine) {
            if (!assigned.contains(tp)) {
                long first = waiting.getOrDefault(tp, now);
                if (TargetCopies.has(tp) || now - first >= options.refreshMs) {
                    ready.add(tp);
                } else {
                    seen.put(tp, first);
                }
            }
        }
        waiting = seen;
        Set<TopicPartition> gone = new HashSet<>(assigned);
        gone.removeAll(mine);
        return new Change(ready, gone);
    }

    /** The time between looks: sooner while a partition waits for a target copy the supervisor will tell of. */
    long lookEveryMs() {
        return waiting.isEmpty() || !TargetCopies.told() ? options.refreshMs
                : Math.min(TargetCopies.WAITING_LOOK_MS, options.refreshMs);
    }

    /**
     * {@code tp}'s topic was deleted: its records {@code [from, to)} were never handed out by this stream, counted
     * and named by the supervisor ({@link Stats#addLost}).
     */
    void lost(TopicPartition tp, long from, long to) {
        if (to > from) {
            Stats.EXECUTOR.addLost(tp.topic(), tp.partition(), from, to, Stats.TOPIC_DELETED);
        }
    }

    /**
     * A batch leaves out partitions of {@code assigned} (each read up to {@code next}, the next offset to hand
     * out): those whose topic was deleted lost what the stream had not handed out of them.
     */
    void dropped(Set<TopicPartition> assigned, Set<TopicPartition> wanted, Map<TopicPartition, Long> next) {
        Set<TopicPartition> dropped = new HashSet<>(assigned);
        dropped.removeAll(wanted);
        dropped.retainAll(next.keySet());
        Set<TopicPartition> existing = dropped.isEmpty() ? null : existing();
        if (existing != null) {
            dropped.stream().filter(tp -> !existing.contains(tp)).forEach(tp -> lost(tp, next.get(tp), fetchedEnd(tp)));
        }
    }

    /** {@code tp}'s end as this consumer last fetched it (its high watermark), without asking; -1 if unknown. */
    long fetchedEnd(TopicPartition tp) {
        try {
            OptionalLong lag = consumer.currentLag(tp);
            return lag.isPresent() ? consumer.position(tp, Duration.ZERO) + lag.getAsLong() : -1;
        } catch (RuntimeException e) {
            log.debug("{}: no end known from the last fetch: {}", tp, e.toString());
            return -1;
        }
    }
}
