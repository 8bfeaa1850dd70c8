package io.mirrord.source;

import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.WakeupException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's questions to the source cluster, through one consumer of its own: the partitions of the topics
 * that match (listed again at most every {@code topic.refresh.ms}, not at every batch) and their first and end
 * offsets. An unreachable source is waited for, asked again every second, not failed: an outage is a state.
 */
final class SourceMetadata {
    private static final Logger log = LoggerFactory.getLogger(SourceMetadata.class);
    private static final Duration ASK_TIMEOUT = Duration.ofSeconds(1);

    private final SourceOptions options;
    private KafkaConsumer<byte[], byte[]> consumer;  // guarded by this
    private Set<TopicPartition> listed;
    private long listedAt;
    private volatile boolean stopped;

    SourceMetadata(SourceOptions options) {
        this.options = options;
    }

    /** The partitions of the topics that match, listed again after {@code topic.refresh.ms} or {@code now}. */
    synchronized Set<TopicPartition> partitions(boolean now) {
        long at = System.currentTimeMillis();
        if (listed == null || now || at - listedAt >= options.refreshMs) {
            listed = matching(ask(() -> consumer().listTopics(ASK_TIMEOUT)).values(), options);
            listedAt = at;
        }
        return listed;
    }

    synchronized Map<TopicPartition, Long> beginningOffsets(Set<TopicPartition> partitions) {
        return ask(() -> consumer().beginningOffsets(partitions, ASK_TIMEOUT));
    }

    synchronized Map<TopicPartition, Long> endOffsets(Set<TopicPartition> partitions) {
        return ask(() -> consumer().endOffsets(partitions, ASK_TIMEOUT));
    }

    /** The end offsets of the partitions that match, as listed when the question is asked (again). */
    synchronized Map<TopicPartition, Long> endOffsets() {
        return ask(() -> consumer().endOffsets(partitions(false), ASK_TIMEOUT));
    }

    /**
     * The first offsets of those of {@code partitions} that still exist, as listed when the question is asked
     * (again): a question about a deleted partition would wait.
     */
    synchronized Map<TopicPartition, Long> firstOffsetsOfExisting(Set<TopicPartition> partitions) {
        return ask(() -> consumer().beginningOffsets(existing(partitions), ASK_TIMEOUT));
    }

    private Set<TopicPartition> existing(Set<TopicPartition> partitions) {
        Set<TopicPartition> existing = new HashSet<>(partitions);
        existing.retainAll(partitions(false));
        return existing;
    }

    /** Ends a question under way (from another thread) and closes the consumer. */
    void stop() {
        stopped = true;
        KafkaConsumer<byte[], byte[]> asking = consumer;
        if (asking != null) {
            asking.wakeup();
        }
        synchronized (this) {
            if (consumer != null) {
                consumer.close(Duration.ZERO);
                consumer = null;
            }
        }
    }

    static Set<TopicPartition> matching(Collection<List<PartitionInfo>> topics, SourceOptions options) {
        Set<TopicPartition> partitions = new HashSet<>();
        for (List<PartitionInfo> infos : topics) {
            for (PartitionInfo info : infos) {
                if (options.matches(info.topic())) {
                    partitions.add(new TopicPartition(info.topic(), info.partition()));
                }
            }
        }
        return partitions;
    }

    private KafkaConsumer<byte[], byte[]> consumer() {
        if (consumer == null) {
            consumer = new KafkaConsumer<>(options.consumerConfig("source-metadata"));
        }
        return consumer;
    }

    /**
     * Asks the source until it answers. A question not answered in time lists the topics again before it is
     * asked again (it may name a deleted topic): a question that names partitions as listed names them anew.
     */
    private <T> T ask(Supplier<T> question) {
        long since = System.currentTimeMillis();
        long warned = since;
        while (true) {
            try {
                return question.get();
            } catch (TimeoutException e) {
                if (stopped || Thread.currentThread().isInterrupted()) {
                    throw e;
                }
                listed = null;
                long now = System.currentTimeMillis();
                if (now - warned >= 60_000) {
                    warned = now;
                    log.warn("the source cluster has not answered for {} s; asking again", (now - since) / 1000);
                }
            } catch (WakeupException e) {
                throw new IllegalStateException("mirrord's source was stopped", e);
            }
        }
    }
}
