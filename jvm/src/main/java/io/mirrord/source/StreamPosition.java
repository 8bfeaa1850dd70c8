package io.mirrord.source;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;

/** Where one stream stands at the end of a real-time batch: the next offset of each partition it read. */
final class StreamPosition implements PartitionOffset {
    private static final long serialVersionUID = 1L;
    final HashMap<TopicPartition, Long> offsets;

    StreamPosition(Map<TopicPartition, Long> offsets) {
        this.offsets = new HashMap<>(offsets);
    }
}
