package io.mirrord.source;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The source's options, as the query passes them: {@code subscribePattern} (the whitelist, matched against
 * the whole topic name), {@code num.streams}, {@code startingOffsets} (earliest, latest, or Spark's Kafka
 * source's JSON, -2 earliest and -1 latest per partition), {@code topic.refresh.ms},
 * {@code maxOffsetsPerTrigger} (micro-batch mode), {@code poll.timeout.ms}, {@code positions.group.id} (the
 * group the acknowledged positions are committed to, docs/decisions.md §10), and {@code kafka.*}: the source
 * cluster's consumer properties.
 */
final class SourceOptions implements Serializable {
    private static final long serialVersionUID = 1L;
    static final long REFRESH_MS_DEFAULT = 5_000;
    static final long POLL_TIMEOUT_MS_DEFAULT = 120_000;

    final Pattern pattern;
    final int streams;
    final String starting;
    final long refreshMs;
    final long pollTimeoutMs;
    final long maxOffsetsPerTrigger;  // 0: no limit
    final Map<String, String> kafka;  // consumer properties, without the prefix
    final String positionsGroup;  // the group mirrord's positions are committed to (null: none)
    final int maxPollRecords;  // the most records a poll returns: a poll that returns as many found more ready

    private SourceOptions(Pattern pattern, int streams, String starting, long refreshMs, long pollTimeoutMs,
                          long maxOffsetsPerTrigger, Map<String, String> kafka, String positionsGroup) {
        this.pattern = pattern;
        this.streams = streams;
        this.starting = starting;
        this.refreshMs = refreshMs;
        this.pollTimeoutMs = pollTimeoutMs;
        this.maxOffsetsPerTrigger = maxOffsetsPerTrigger;
        this.kafka = kafka;
        this.positionsGroup = positionsGroup;
        this.maxPollRecords = Integer.parseInt(kafka.getOrDefault(ConsumerConfig.MAX_POLL_RECORDS_CONFIG,
                String.valueOf(ConsumerConfig.DEFAULT_MAX_POLL_RECORDS)).trim());
    }

    static SourceOptions parse(Map<String, String> options) {
        String pattern = options.get("subscribePattern");
        if (pattern == null || pattern.isEmpty()) {
            throw new IllegalArgumentException("mirrord's source needs the option subscribePattern");
        }
        Map<String, String> kafka = new HashMap<>();
        options.forEach((key, value) -> {
            if (key.startsWith("kafka.")) {
                kafka.put(key.substring("kafka.".length()), value);
            }
        });
        if (!kafka.containsKey(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG)) {
            throw new IllegalArgumentException("mirrord's source needs the option kafka.bootstrap.servers");
        }
        int streams = Integer.parseInt(options.getOrDefault("num.streams", "1"));
        if (streams < 1) {
            throw new IllegalArgumentException("num.streams must be at least 1, got " + streams);
        }
        return new SourceOptions(Pattern.compile(pattern), streams,
            options.getOrDefault("startingOffsets", "earliest").trim(),
            Long.parseLong(options.getOrDefault("topic.refresh.ms", String.valueOf(REFRESH_MS_DEFAULT))),
            Long.parseLong(options.getOrDefault("poll.timeout.ms", String.valueOf(POLL_TIMEOUT_MS_DEFAULT))),
            Long.parseLong(options.getOrDefault("maxOffsetsPerTrigger", "0")), kafka,
            options.getOrDefault("positions.group.id", "").isEmpty() ? null : options.get("positions.group.id"));
    }

    /**
     * A consumer's properties: the user's, with what a stream needs. No group: a stream's partitions are
     * assigned by the query, and positions live in Spark's checkpoint (mirrord commits the group elsewhere).
     * Records below the log start are not skipped by the client but reported ({@code auto.offset.reset=none}).
     */
    Map<String, Object> consumerConfig(String role) {
        Map<String, Object> config = new HashMap<>(kafka);
        config.remove(ConsumerConfig.GROUP_ID_CONFIG);
        config.remove(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG);
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        String client = kafka.getOrDefault(ConsumerConfig.CLIENT_ID_CONFIG, "mirrord");
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, client + "-" + role);
        return config;
    }

    /** The consumer's {@code fetch.max.wait.ms}: the user's, or Kafka's default. */
    long fetchMaxWaitMs() {
        return Long.parseLong(kafka.getOrDefault(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG,
            String.valueOf(ConsumerConfig.DEFAULT_FETCH_MAX_WAIT_MS)).trim());
    }

    boolean matches(String topic) {
        return pattern.matcher(topic).matches();
    }
}
