package io.mirrord.source;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * Where the source stands: the next offset to read of every partition, in Spark's Kafka source's JSON
 * ({@code {"topic":{"0":42}}}), which Spark writes to the checkpoint's offset log: a checkpoint written by
 * Spark's Kafka source resumes here, and mirrord's supervisor reads both the same way.
 */
final class SourceOffset extends Offset {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final TypeReference<Map<String, Map<String, Long>>> SHAPE = new TypeReference<>() { };

    final Map<TopicPartition, Long> offsets;

    SourceOffset(Map<TopicPartition, Long> offsets) {
        this.offsets = Collections.unmodifiableMap(new HashMap<>(offsets));
    }

    static SourceOffset parse(String json) {
        try {
            Map<TopicPartition, Long> offsets = new HashMap<>();
            JSON.readValue(json, SHAPE).forEach((topic, partitions) -> partitions.forEach(
                (partition, offset) -> offsets.put(new TopicPartition(topic, Integer.parseInt(partition)), offset)));
            return new SourceOffset(offsets);
        } catch (JsonProcessingException | NumberFormatException e) {
            throw new IllegalArgumentException("not a source offset: " + json, e);
        }
    }

    @Override
    public String json() {
        Map<String, Map<String, Long>> byTopic = new TreeMap<>();
        offsets.forEach((tp, offset) -> byTopic.computeIfAbsent(tp.topic(), t -> new TreeMap<>(
            (a, b) -> Integer.compare(Integer.parseInt(a), Integer.parseInt(b)))).put(String.valueOf(tp.partition()),
            offset));
        try {
            return JSON.writeValueAsString(byTopic);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }
}
