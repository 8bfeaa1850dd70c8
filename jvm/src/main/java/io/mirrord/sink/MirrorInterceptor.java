package io.mirrord.sink;

import io.mirrord.fencing.Fence;
import io.mirrord.fencing.FencedError;
import io.mirrord.metrics.MirrordPlugin;
import io.mirrord.metrics.Stats;
import io.mirrord.metrics.WarnLimiter;
import io.mirrord.positions.Incarnations;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.function.Function;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The producer side of mirrord's data path, set on Spark's Kafka sink with
 * {@code kafka.interceptor.classes=io.mirrord.sink.MirrorInterceptor}: unwraps each record's
 * {@link Envelope} so the target gets the source key and timestamp, counts what was written into
 * {@link Stats#EXECUTOR}, and pairs source with target offsets for the {@link OffsetSyncWriter}.
 *
 * <p>Pairing: {@code onSend} pushes the source offset on a FIFO of its target partition and
 * {@code onAcknowledgement} pops it, which is right because Kafka acknowledges a partition's records
 * in the order they were sent, exactly once each (a synchronous send failure included). That order is
 * the order of {@code onSend} calls only if one thread sends to a given target partition at a time,
 * which holds because Spark writes a source partition from one task at a time and mirrord sends each
 * record to the same-numbered target partition. Records sent without a partition are not paired. A failed record
 * stops its source partition's position until the query sends from it again, and ends its offset-sync run
 * ({@link Pairing}).
 *
 * <p>Settings, from the producer's configuration (on Spark's sink: {@code kafka.<name>}):
 * {@value #SYNCS_TOPIC} (none: no offset syncs), {@value #OFFSET_LAG_MAX}, {@value #SYNCS_FLUSH_MS}
 * and {@value #SOURCE_TOPIC_PREFIX}.
 *
 * <p>Spark never closes the producers it caches, so {@link #close()} does not run when Spark stops:
 * {@link #flushAll} writes every live interceptor's delayed syncs instead ({@link MirrordPlugin} calls
 * it when an executor stops).
 */
public final class MirrorInterceptor implements ProducerInterceptor<byte[], byte[]> {
    /** Compacted one-partition topic in the target the offset syncs go to; absent or empty: none written. */
    public static final String SYNCS_TOPIC = "mirrord.offset.syncs.topic";
    /** MirrorMaker 2's {@code offset.lag.max}: a sync at least every this many records of a run. */
    public static final String OFFSET_LAG_MAX = "mirrord.offset.lag.max";
    public static final long OFFSET_LAG_MAX_DEFAULT = 100;
    /** How often delayed syncs (the last record of a run so far) are written. */
    public static final String SYNCS_FLUSH_MS = "mirrord.offset.syncs.flush.ms";
    public static final long SYNCS_FLUSH_MS_DEFAULT = 1000;
    /** What the replication policy puts before a source topic's name to name the target topic. */
    public static final String SOURCE_TOPIC_PREFIX = "mirrord.source.topic.prefix";
    public static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(5);
    private static final Logger log = LoggerFactory.getLogger(MirrorInterceptor.class);
    /** The interceptors with a writer, configured and not closed; weakly, so that a dropped producer goes. */
    private static final Map<MirrorInterceptor, Boolean> LIVE = new WeakHashMap<>();  // guarded by itself

    private final Function<Map<String, Object>, Producer<byte[], byte[]>> syncProducers;
    private final Stats stats;
    private final boolean background;
    private final Pairings pairings = new Pairings(this::pairing);
    private final WarnLimiter unpartitioned = new WarnLimiter(60_000);
    private String sourceTopicPrefix = "";
    private OffsetSyncWriter writer;  // null: no offset syncs

    public MirrorInterceptor() {
        this(KafkaProducer::new, Stats.EXECUTOR, true);
    }

    /** For tests: the syncs' producer made by {@code syncProducers}, the writer's thread only if {@code background}. */
    public MirrorInterceptor(Function<Map<String, Object>, Producer<byte[], byte[]>> syncProducers, Stats stats,
                      boolean background) {
        this.syncProducers = syncProducers;
        this.stats = stats;
        this.background = background;
    }

    @Override
    public void configure(Map<String, ?> configs) {
        Object prefix = configs.get(SOURCE_TOPIC_PREFIX);
        sourceTopicPrefix = prefix == null ? "" : prefix.toString();
        Object topic = configs.get(SYNCS_TOPIC);
        if (topic != null && !topic.toString().isEmpty()) {
            long lagMax = longSetting(configs, OFFSET_LAG_MAX, OFFSET_LAG_MAX_DEFAULT, 0);
            long flushMs = longSetting(configs, SYNCS_FLUSH_MS, SYNCS_FLUSH_MS_DEFAULT, 1);
            writer = new OffsetSyncWriter(syncProducers.apply(syncProducerConfig(configs)), topic.toString(), lagMax,
                    flushMs, stats, background);
            if (background) {  // tests' writers have no target to ask
                writer.nameTargetTopics(syncProducerConfig(configs), sourceTopicPrefix);
            }
        }
        synchronized (LIVE) {
            LIVE.put(this, Boolean.TRUE);
        }
    }

    /**
     * Records sent by every live interceptor in this JVM and not yet acknowledged or failed: after a query
     * stopped, its producers still deliver what they buffered, and the positions are final once this is 0.
     */
    public static long inFlight() {
        List<MirrorInterceptor> live;
        synchronized (LIVE) {
            live = new ArrayList<>(LIVE.keySet());
        }
        long total = 0;
        for (MirrorInterceptor interceptor : live) {
            total += interceptor.inFlightHere();
        }
        return total;
    }

    /**
     * Writes the delayed syncs of every live interceptor in this JVM and waits, at most {@code timeout}
     * in all, until every sync emitted so far is acknowledged; false if time ran out for any of them.
     */
    public static boolean flushAll(Duration timeout) {
        List<MirrorInterceptor> live;
        synchronized (LIVE) {
            live = new ArrayList<>(LIVE.keySet());
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        boolean flushed = true;
        for (MirrorInterceptor interceptor : live) {
            if (interceptor.writer != null) {
                Duration left = Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
                flushed &= interceptor.writer.flush(left);  // with no time left, still emits the delayed syncs
            }
        }
        return flushed;
    }

    /** {@link #flushAll(Duration)} for py4j: {@code spark._jvm.io.mirrord.sink.MirrorInterceptor.flushAll(5000)}. */
    public static boolean flushAll(long timeoutMs) {
        return flushAll(Duration.ofMillis(timeoutMs));
    }

    /** The data producer's settings for the syncs' producer: same cluster and security, its own identity. */
    static Map<String, Object> syncProducerConfig(Map<String, ?> configs) {
        Map<String, Object> config = new HashMap<>();
        configs.forEach((key, value) -> {
            if (!key.startsWith("mirrord.")) {
                config.put(key, value);
            }
        });
        config.remove(ProducerConfig.INTERCEPTOR_CLASSES_CONFIG);
        config.remove(ProducerConfig.CLIENT_ID_CONFIG);
        config.remove(ProducerConfig.TRANSACTIONAL_ID_CONFIG);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        // A sync every offset.lag.max records is thousands a second in a backfill: batched, not one request
        // each (measured: a fifth of the rate with linger.ms=0). Nothing waits on a sync but flushAll.
        config.put(ProducerConfig.LINGER_MS_CONFIG, "200");
        config.put(ProducerConfig.BATCH_SIZE_CONFIG, "65536");
        withinDelivery(config);
        return config;
    }

    /**
     * The syncs' linger.ms and request.timeout.ms within the data producer's delivery.timeout.ms, which leader
     * election bounds by the lease (docs/decisions.md §6): Kafka wants delivery >= linger + request.
     */
    static void withinDelivery(Map<String, Object> config) {
        Object delivery = config.get(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG);
        if (delivery == null) {
            return;
        }
        long deliveryMs = Long.parseLong(delivery.toString().trim());
        long lingerMs = Math.min(200, deliveryMs / 2);
        config.put(ProducerConfig.LINGER_MS_CONFIG, String.valueOf(lingerMs));
        Object request = config.get(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG);
        long requestMs = request == null ? 30_000 : Long.parseLong(request.toString().trim());
        if (lingerMs + requestMs > deliveryMs) {
            config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(deliveryMs - lingerMs));
        }
    }

    /**
     * Throws {@link EnvelopeError} for a key that is not an envelope, and {@link FencedError} for every record once this host's
     * {@link Fence} lapsed (see there why an error, not an exception).
     */
    @Override
    public ProducerRecord<byte[], byte[]> onSend(ProducerRecord<byte[], byte[]> record) {
        if (!Fence.open()) {
            throw new FencedError("not sent to " + record.topic() + ": this host's lease lapsed (fenced)");
        }
        Envelope.Unwrapped source = Envelope.unwrap(record.key());
        Integer partition = record.partition();
        Pairing pairing = partition != null && partition >= 0 ? pairings.of(record.topic(), partition) : null;
        ProducerRecord<byte[], byte[]> unwrapped;
        try {
            Long timestamp = source.timestampMs() >= 0 ? source.timestampMs() : null;  // unknown: the producer's clock
            // the pairing's own copy of the topic's name: Spark makes a new String per record, whose hash the
            // producer would compute again in each of its lookups
            unwrapped = new ProducerRecord<>(pairing != null ? pairing.target : record.topic(), partition, timestamp,
                    source.key(), record.value(), record.headers());
        } catch (RuntimeException e) {
            throw new EnvelopeError("cannot unwrap a record for " + record.topic(), e);  // never send the envelope
        }
        long bytes = length(source.key()) + length(record.value());
        if (pairing != null) {
            pairing.sent(source.sourceOffset(), bytes);
        } else {
            stats.addBytes(record.topic(), bytes);
            if (writer != null && unpartitioned.admit() >= 0) {
                log.warn("records for {} are sent without a partition: no offset syncs for them", record.topic());
            }
        }
        return unwrapped;
    }

    @Override
    public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
        if (exception != null) {
            Fence.guard();  // the I/O thread, before its turn's requests go out: a fenced JVM halts here
        }
        if (metadata == null) {
            return;  // Kafka knew neither the record nor its partition: nothing was paired
        }
        Pairing pairing = metadata.partition() >= 0 ? pairings.existing(metadata.topic(), metadata.partition()) : null;
        long latencyMs = exception == null && metadata.hasTimestamp() ? System.currentTimeMillis() - metadata.timestamp()
                : Stats.NO_LATENCY;
        if (pairing != null) {
            pairing.acknowledged(metadata, exception, latencyMs, writer);
        } else if (exception == null) {
            stats.addRecord(metadata.topic());
            if (latencyMs != Stats.NO_LATENCY) {
                stats.observeLatencyMs(latencyMs);
            }
        }
    }

    @Override
    public void close() {
        synchronized (LIVE) {
            LIVE.remove(this);
        }
        pairings.forEach(pairing -> stats.release(pairing.tally));
        if (writer != null) {
            writer.close(CLOSE_TIMEOUT);
        }
    }

    /** The writer, for tests. */
    OffsetSyncWriter writer() {
        return writer;
    }

    private long inFlightHere() {
        long[] total = {0};
        pairings.forEach(pairing -> total[0] += pairing.inFlight());
        return total[0];
    }

    /** A target partition's pairing, made as the first record is sent to it. */
    private Pairing pairing(String topic, int partition) {
        TopicPartition source = new TopicPartition(sourceTopic(topic), partition);
        return new Pairing(topic, stats.tally(topic, source.topic(), partition),
                writer == null ? null : writer.state(source), Incarnations.of(source.topic(), partition));
    }

    /** The prefix replication policy in reverse; a target topic without the prefix keeps its name. */
    String sourceTopic(String targetTopic) {
        return targetTopic.startsWith(sourceTopicPrefix) ? targetTopic.substring(sourceTopicPrefix.length()) : targetTopic;
    }

    private static long longSetting(Map<String, ?> configs, String name, long defaultValue, long min) {
        Object value = configs.get(name);
        if (value == null || value.toString().isEmpty()) {
            return defaultValue;
        }
        long parsed;
        try {
            parsed = value instanceof Number n ? n.longValue() : Long.parseLong(value.toString().trim());
        } catch (NumberFormatException e) {
            throw new ConfigException(name, value, "not a whole number");
        }
        if (parsed < min) {
            throw new ConfigException(name, value, "must be at least " + min);
        }
        return parsed;
    }

    private static long length(byte[] bytes) {
        return bytes == null ? 0 : bytes.length;
    }
}
