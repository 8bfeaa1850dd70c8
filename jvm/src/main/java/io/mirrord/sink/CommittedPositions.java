package io.mirrord.sink;

import io.mirrord.positions.Incarnations;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The flow's positions topic on the target (docs/decisions.md §12): each transaction writes there the source
 * positions its records reach, key {@code topic:partition}, value {@value #FORMAT}; and a stream's writer, when
 * it opens, reads back the positions its stream's earlier owners committed. Spark runs a task again from its
 * batch's start (an executor lost, a worker decommissioned, a retried attempt), so a re-run task meets the
 * records its earlier attempt committed: {@link #copied} says which, and the writer skips them. One instance
 * belongs to one stream's writer and is used by its task's thread only.
 */
final class CommittedPositions {
    static final String FORMAT = "{\"offset\":<next offset>,\"topicId\":\"<the source topic's id>\"}";
    private static final Pattern OFFSET = Pattern.compile("\"offset\"\\s*:\\s*(\\d+)");
    private static final Pattern TOPIC_ID = Pattern.compile("\"topicId\"\\s*:\\s*\"([^\"]*)\"");
    private static final Duration POLL = Duration.ofMillis(100);

    /** A committed position: the next offset to copy, in the source topic of that id (null: not known). */
    record Position(long next, String topicId) {
    }

    private final Map<TopicPartition, Position> below;  // partitions whose next records may be copied already
    private long skipped;

    CommittedPositions(Map<TopicPartition, Position> positions) {
        this.below = new HashMap<>(positions);
    }

    /** No earlier owner (a new stream, the tests). */
    static CommittedPositions none() {
        return new CommittedPositions(Map.of());
    }

    /** How many partitions the writer may meet records of that are committed already. */
    int partitions() {
        return below.size();
    }

    /**
     * Whether the record of {@code source} at {@code offset} is copied already, in a transaction an earlier owner
     * of the stream committed: below the committed position, in the same topic (a position of a topic since
     * recreated, another id, holds nothing). Records of a partition come in order: once one is past its position,
     * the partition is forgotten.
     */
    boolean copied(TopicPartition source, long offset) {
        if (below.isEmpty()) {
            return false;
        }
        Position p = below.get(source);
        if (p == null) {
            return false;
        }
        String id = Incarnations.topicIdOf(source.topic()).get();
        if (offset < p.next() && (p.topicId() == null || id == null || p.topicId().equals(id))) {
            skipped++;
            return true;
        }
        below.remove(source);
        return false;
    }

    /** Records {@link #copied} said were copied already, since the last call. */
    long takeSkipped() {
        long n = skipped;
        skipped = 0;
        return n;
    }

    static byte[] key(TopicPartition tp) {
        return (tp.topic() + ":" + tp.partition()).getBytes(StandardCharsets.UTF_8);
    }

    /**
     * A position as committed: the next offset and the id of the source topic it is an offset of, so that a
     * start after the topic was recreated (and refilled past it) reads the new topic from its start.
     */
    static byte[] value(long next, String topicId) {
        String value = topicId == null ? "{\"offset\":" + next + "}"
                : "{\"offset\":" + next + ",\"topicId\":\"" + topicId + "\"}";
        return value.getBytes(StandardCharsets.UTF_8);
    }

    /** The partition a key names; null if it names none. */
    static TopicPartition partitionOf(byte[] key) {
        String s = key == null ? "" : new String(key, StandardCharsets.UTF_8);
        int colon = s.lastIndexOf(':');
        try {
            return colon <= 0 ? null : new TopicPartition(s.substring(0, colon), Integer.parseInt(s.substring(colon + 1)));
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /** The position a value holds; null if it holds none. */
    static Position parse(byte[] value) {
        String s = new String(value, StandardCharsets.UTF_8);
        Matcher offset = OFFSET.matcher(s);
        if (!offset.find()) {
            return null;
        }
        Matcher id = TOPIC_ID.matcher(s);
        return new Position(Long.parseLong(offset.group(1)), id.find() ? id.group(1) : null);
    }

    /**
     * The committed positions of the partitions {@code mine} accepts, read {@code read_committed} from
     * {@code topic} once every transaction written to it before this call is decided: the read goes on until the
     * last stable offset reaches each partition's end as it was at the call (another stream's transaction open
     * there holds it for as long as its commit takes). Called after the stream's producer's
     * {@code initTransactions}, which returns once the stream's own earlier transactions are decided, so every
     * position they committed is read. {@code clientConfig}: the target's client properties.
     */
    static CommittedPositions read(Map<String, String> clientConfig, String clientId, String topic,
                                   Predicate<TopicPartition> mine, long timeoutMs) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        Map<String, Object> consumerConfig = new HashMap<>(clientConfig);
        consumerConfig.remove(ConsumerConfig.INTERCEPTOR_CLASSES_CONFIG);  // the producer's, not a consumer's
        consumerConfig.remove(ConsumerConfig.GROUP_ID_CONFIG);
        consumerConfig.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        consumerConfig.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        consumerConfig.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerConfig.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");  // the start made it, compacted
        consumerConfig.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        consumerConfig.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Map<String, Object> adminConfig = new HashMap<>(clientConfig);
        adminConfig.put(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
        Map<TopicPartition, Position> found = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerConfig);
             Admin admin = Admin.create(adminConfig)) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs)).stream()
                    .map(p -> new TopicPartition(p.topic(), p.partition())).toList();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            partitions.forEach(tp -> latest.put(tp, OffsetSpec.latest()));
            Map<TopicPartition, Long> ends = new HashMap<>();
            admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).all()
                    .get(timeoutMs, TimeUnit.MILLISECONDS).forEach((tp, info) -> ends.put(tp, info.offset()));
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            while (!reached(consumer, ends)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new TimeoutException("the last stable offset did not reach " + ends);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {
                    TopicPartition tp = partitionOf(r.key());
                    if (tp != null && mine.test(tp)) {
                        Position p = r.value() == null ? null : parse(r.value());
                        if (p == null) {
                            found.remove(tp);
                        } else {
                            found.put(tp, p);
                        }
                    }
                }
            }
        } catch (ExecutionException | TimeoutException | KafkaException e) {
            throw new TransactionFailed("cannot read the committed positions from " + topic + " for " + clientId
                    + ": " + (e instanceof ExecutionException ? e.getCause() : e), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TransactionFailed("interrupted reading the committed positions from " + topic, e);
        }
        return new CommittedPositions(found);
    }

    private static boolean reached(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> end : ends.entrySet()) {
            if (consumer.position(end.getKey()) < end.getValue()) {
                return false;
            }
        }
        return true;
    }
}
