package io.mirrord.sink;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The settings of a stream's own producer: the target's producer properties, bytes in and out, an id of the
 * stream's own, and, when producer.properties sets none of {@code batch.size}, {@code buffer.memory} and
 * {@code linger.ms}, a pool sized for the stream's partitions (docs/decisions.md §2).
 *
 * <p>The rule: each partition the stream writes wants a batch open while its earlier ones are in flight, and the
 * producer allocates a whole {@code batch.size} for every batch, however few records it holds. So
 * {@code batch.size} = {@value #PER_STREAM_BATCHES} ÷ the stream's partitions, as a power of two between
 * {@value #MIN_BATCH} and {@value #MAX_BATCH} bytes (256 KiB up to 64 partitions, 64 KiB at 240, 16 KiB from
 * 1,024), and {@code buffer.memory} room for four batches of each partition, between Kafka's default 32 MiB and
 * {@value #MAX_BUFFER} bytes (32 MiB up to 32 partitions, 60 MiB at 240, 62.5 MiB at 1,000, 128 MiB from 2,048);
 * {@code linger.ms} stays at mirrord's default (5 ms, mirrord/settings/translate.py).
 *
 * <p>Whatever the pool, a stream's records awaiting acknowledgement are at most {@value #QUEUED_PER_DELIVERY_SECOND}
 * bytes per second of {@code delivery.timeout.ms} (at least {@value #MIN_QUEUED}; {@link #queueBound}), and no more
 * than the target acknowledges in a sixth of it ({@link QueueBound}).
 */
final class StreamProducers {
    static final long PER_STREAM_BATCHES = 16L << 20;
    static final int MIN_BATCH = 16 << 10;
    static final int MAX_BATCH = 256 << 10;
    static final long MIN_BUFFER = 32L << 20;
    static final long MAX_BUFFER = 128L << 20;
    static final int BATCHES_PER_PARTITION = 4;
    static final long QUEUED_PER_DELIVERY_SECOND = 4L << 20;
    static final long MIN_QUEUED = 4L << 20;

    private StreamProducers() {
    }

    /**
     * The producer settings of stream {@code stream} from the target's {@code properties}; {@code partitions}: the
     * source partitions the flow had when its query started, over {@code streams} streams; {@code sized}: whether
     * producer.properties left the pool's sizes to mirrord.
     */
    static Map<String, Object> config(Map<String, String> properties, int stream, int streams, int partitions,
                                      boolean sized) {
        Map<String, Object> config = new HashMap<>(properties);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        Object clientId = properties.get(ProducerConfig.CLIENT_ID_CONFIG);
        config.put(ProducerConfig.CLIENT_ID_CONFIG, (clientId == null ? "mirrord" : clientId) + "-stream-" + stream);
        if (sized) {
            int perStream = Math.max(1, (partitions + streams - 1) / streams);
            int batch = batchSize(perStream);
            config.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(batch));
            config.put(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(bufferMemory(perStream, batch)));
        }
        return config;
    }

    /**
     * The bytes of records a stream may have awaiting the target's acknowledgement: a batch waits in the producer
     * behind everything queued before it (the sender takes one batch of each partition per round), and under
     * leader election a record has 3/10 of the session to be acknowledged ({@code delivery.timeout.ms}, 3 s by
     * default: docs/decisions.md §2 and §6). Without election the producer waits as long as it takes, and the
     * bound is as good as none.
     */
    static long queueBound(Map<String, String> properties) {
        String delivery = properties.get(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG);
        if (delivery == null) {
            return Long.MAX_VALUE;
        }
        long ms = Long.parseLong(delivery.trim());
        return Math.max(MIN_QUEUED, ms * QUEUED_PER_DELIVERY_SECOND / 1000);  // no overflow below 2^31 ms
    }

    /**
     * A stream's {@link QueueBound}: {@link #queueBound} at most, and what the target acknowledges in a sixth of
     * {@code delivery.timeout.ms}.
     */
    static QueueBound bound(Map<String, String> properties) {
        String delivery = properties.get(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG);
        return delivery == null ? QueueBound.fixed(Long.MAX_VALUE)
                : QueueBound.following(queueBound(properties), Long.parseLong(delivery.trim()));
    }

    static int batchSize(int partitions) {
        long share = PER_STREAM_BATCHES / Math.max(1, partitions);
        long pow2 = Long.highestOneBit(Math.max(1, share));
        return (int) Math.max(MIN_BATCH, Math.min(MAX_BATCH, pow2));
    }

    static long bufferMemory(int partitions, int batchSize) {
        long wanted = (long) BATCHES_PER_PARTITION * partitions * batchSize;
        return Math.max(MIN_BUFFER, Math.min(MAX_BUFFER, wanted));
    }
}
