package io.mirrord.source;

import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.utils.Utils;

/**
 * Which stream reads a partition: a function of the partition and the number of streams only, so the driver
 * planning a batch and a stream finding a new topic in the middle of one agree without asking each other.
 * A topic's partitions take the streams in turn from a point its name decides: a topic spreads evenly, and
 * many small topics spread about evenly.
 */
public final class Assignment {
    private Assignment() {
    }

    public static int streamOf(TopicPartition tp, int streams) {
        return Math.floorMod(Utils.murmur2(tp.topic().getBytes(StandardCharsets.UTF_8)) + tp.partition(), streams);
    }
}
