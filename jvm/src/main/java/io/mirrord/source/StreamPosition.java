package io.mirrord.source;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;

/**
 * Where one stream stands at the end of a real-time batch: the next offset of each partition it read, and the
 * partitions it took up from their start on its own during the batch (new, or recreated under it), with the ids their
 * topics had before it read them ({@link FromStart}).
 */
final class StreamPosition implements PartitionOffset {
    private static final long serialVersionUID = 3L;
    final HashMap<TopicPartition, Long> offsets;
    final HashSet<TopicPartition> readFromStart;
    final HashMap<String, String> ids;

    StreamPosition(Map<TopicPartition, Long> offsets, FromStart fromStart) {
        this.offsets = new HashMap<>(offsets);
        this.readFromStart = new HashSet<>(fromStart.partitions);
        this.ids = new HashMap<>(fromStart.ids);
    }
}
