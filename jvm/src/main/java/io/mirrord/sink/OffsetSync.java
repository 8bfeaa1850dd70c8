package io.mirrord.sink;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * One offset sync: {@code upstream} in {@code source} is {@code downstream} in the target; {@code earlier}
 * holds the writer's earlier runs of the partition as (upstream, downstream, run start) triples, by
 * upstream offset.
 */
record OffsetSync(TopicPartition source, long upstream, long downstream, long runStart, long[] earlier, long[] before,
            String targetTopicId) {
    static final long[] NONE = new long[0];

    OffsetSync(TopicPartition source, long upstream, long downstream, long runStart) {
        this(source, upstream, downstream, runStart, NONE, NONE, null);
    }

    OffsetSync(TopicPartition source, long upstream, long downstream, long runStart, long[] earlier) {
        this(source, upstream, downstream, runStart, earlier, NONE, null);
    }

    /** This sync, naming the incarnation of the target topic it was copied into (null: unknown). */
    OffsetSync in(String topicId) {
        return new OffsetSync(source, upstream, downstream, runStart, earlier, before, topicId);
    }

    /**
     * MirrorMaker 2's {@code OffsetSync} for partition 0 of {@code syncTopic}, its key followed by
     * {@code writer}, with the run start and (if any) the earlier runs as headers.
     */
    ProducerRecord<byte[], byte[]> toRecord(String syncTopic, long writer) {
        RecordHeaders headers = new RecordHeaders();
        headers.add(OffsetSyncWriter.RUN_START_HEADER, ByteBuffer.allocate(Long.BYTES).putLong(runStart).array());
        if (earlier.length > 0) {
            headers.add(OffsetSyncWriter.EARLIER_RUNS_HEADER, longs(earlier));
        }
        if (before.length > 0) {
            headers.add(OffsetSyncWriter.RUNS_BEFORE_HEADER, longs(before));
        }
        if (targetTopicId != null) {
            headers.add(TargetTopicIds.HEADER, targetTopicId.getBytes(StandardCharsets.UTF_8));
        }
        byte[] key = key();
        byte[] keyed = ByteBuffer.allocate(key.length + Long.BYTES).put(key).putLong(writer).array();
        return new ProducerRecord<>(syncTopic, 0, null, keyed, value(), headers);
    }

    private static byte[] longs(long[] values) {
        ByteBuffer out = ByteBuffer.allocate(values.length * Long.BYTES);
        for (long v : values) {
            out.putLong(v);
        }
        return out.array();
    }

    /** MirrorMaker 2's key: Kafka protocol STRING topic (INT16 length, UTF-8), INT32 partition. */
    byte[] key() {
        byte[] name = source.topic().getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(Short.BYTES + name.length + Integer.BYTES)
                .putShort((short) name.length).put(name).putInt(source.partition()).array();
    }

    /** INT64 upstream offset, INT64 downstream offset. */
    byte[] value() {
        return ByteBuffer.allocate(2 * Long.BYTES).putLong(upstream).putLong(downstream).array();
    }
}
