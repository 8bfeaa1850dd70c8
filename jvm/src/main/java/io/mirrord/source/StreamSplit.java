package io.mirrord.source;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One stream's share of a batch, one Spark task: its partitions and where each starts; in micro-batch mode
 * also where each ends (exclusive), in real-time mode no end (the batch ends on the clock). {@code run}
 * names the query's run, so a stream's consumer is kept for the next batch of the same run only.
 */
final class StreamSplit implements InputPartition {
    private static final long serialVersionUID = 1L;
    final String run;
    final int stream;
    final HashMap<TopicPartition, Long> from;
    final HashMap<TopicPartition, Long> until;  // null in real-time mode
    final HashMap<TopicPartition, Long> incarnations;  // each partition's, as the driver planned it
    final HashMap<String, String> topicIds;  // each topic's id the driver knew then (absent: not known)
    final SourceOptions options;

    StreamSplit(String run, int stream, Map<TopicPartition, Long> from, Map<TopicPartition, Long> until,
                Map<TopicPartition, Long> incarnations, Map<String, String> topicIds, SourceOptions options) {
        this.run = run;
        this.stream = stream;
        this.from = new HashMap<>(from);
        this.until = until == null ? null : new HashMap<>(until);
        this.incarnations = new HashMap<>(incarnations);
        this.topicIds = new HashMap<>(topicIds);
        this.options = options;
    }

    boolean bounded() {
        return until != null;
    }
}
