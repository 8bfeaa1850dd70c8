package io.mirrord.source;

import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a resting stream waits on (docs/decisions.md §9, "An idle stream waits on a fetch the broker holds"): a
 * consumer of its own, made at the stream's first rest, that asks as MirrorMaker's consumers do ({@code
 * fetch.min.bytes} 1, {@code fetch.max.wait.ms} 500), so the broker holds each of its fetches until the first record
 * of a partition the stream reads, or half a second. It rings when that record comes; the stream's own consumer,
 * whose fetches wait 10 ms for 64 KiB, then fetches it. The bell reads one record at most per fetch and drops it: it
 * never hands a record out, and each rest starts it again from the stream's positions. Used by the stream's task
 * thread only.
 */
final class Doorbell {
    private static final Logger log = LoggerFactory.getLogger(Doorbell.class);
    static final int WAIT_MS = ConsumerConfig.DEFAULT_FETCH_MAX_WAIT_MS;  // Kafka's default: the broker holds 500 ms

    enum Rang { YES, NO, UNUSABLE }

    private final Supplier<Consumer<byte[], byte[]>> make;
    private Consumer<byte[], byte[]> bell;
    private Map<TopicPartition, Long> armedAt;  // where the bell was started from; null: start it again
    private boolean unusable;

    Doorbell(Supplier<Consumer<byte[], byte[]>> make) {
        this.make = make;
    }

    /** The bell of a stream whose consumer takes {@code config}: the same source, client and security. */
    static Doorbell of(Map<String, Object> config) {
        Map<String, Object> own = new HashMap<>(config);
        own.put(ConsumerConfig.FETCH_MIN_BYTES_CONFIG, 1);
        own.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, WAIT_MS);
        own.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, 1);  // a broker still answers with a first batch
        own.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 1);
        own.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 1);
        own.put(ConsumerConfig.CLIENT_ID_CONFIG, own.get(ConsumerConfig.CLIENT_ID_CONFIG) + "-idle");
        return new Doorbell(() -> new KafkaConsumer<>(own));
    }

    /**
     * Waits up to {@code ms} for a record of {@code stream}'s partitions that it has not fetched: YES when one came
     * (or its poll failed, which the stream's own poll will meet), NO when none did, UNUSABLE when the bell cannot be
     * started (the stream rests as it did without one).
     */
    Rang await(Consumer<byte[], byte[]> stream, long ms) {
        if (unusable) {
            return Rang.UNUSABLE;
        }
        Map<TopicPartition, Long> from;
        try {
            from = positions(stream);
        } catch (KafkaException e) {  // a position not known yet (a partition just taken up): no bell this time
            return Rang.UNUSABLE;
        }
        if (from.isEmpty()) {
            return Rang.UNUSABLE;
        }
        if (!from.equals(armedAt)) {
            try {
                if (bell == null) {
                    bell = make.get();
                }
                bell.assign(from.keySet());
                from.forEach(bell::seek);
                armedAt = from;
            } catch (InterruptException e) {
                throw e;
            } catch (KafkaException e) {
                log.info("a resting stream polls its own consumer instead of waiting on a second one: {}",
                    e.toString());
                unusable = true;
                return Rang.UNUSABLE;
            }
        }
        try {
            if (bell.poll(Duration.ofMillis(ms)).isEmpty()) {
                return Rang.NO;
            }
        } catch (InterruptException e) {
            throw e;
        } catch (KafkaException e) {  // out of range, a topic gone: the stream's own consumer meets it and says so
            log.debug("the idle stream's bell: {}", e.toString());
        }
        armedAt = null;
        return Rang.YES;
    }

    /** Whether a stream may wait on this bell: false once it could not be started. */
    boolean usable() {
        return !unusable;
    }

    /** Where the stream's consumer fetches next, of the partitions it reads now (not those it paused). */
    private static Map<TopicPartition, Long> positions(Consumer<byte[], byte[]> stream) {
        Set<TopicPartition> reading = new HashSet<>(stream.assignment());
        reading.removeAll(stream.paused());
        Map<TopicPartition, Long> at = new HashMap<>();
        for (TopicPartition tp : reading) {
            at.put(tp, stream.position(tp, Duration.ZERO));
        }
        return at;
    }

    void close() {
        if (bell != null) {
            close(bell, "a resting stream's bell");
        }
    }

    /** Closes {@code consumer} without waiting: what it could not finish is logged at debug, not thrown. */
    static void close(Consumer<byte[], byte[]> consumer, String what) {
        try {
            consumer.close(Duration.ZERO);
        } catch (RuntimeException e) {
            log.debug("closing {}: {}", what, e.toString());
        }
    }
}
