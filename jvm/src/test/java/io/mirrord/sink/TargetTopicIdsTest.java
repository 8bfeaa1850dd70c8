package io.mirrord.sink;

import io.mirrord.metrics.Stats;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

/** Each sync names its target topic's incarnation, and a recreated target topic's runs are forgotten (§7). */
public class TargetTopicIdsTest {
    static final String OLD = "AAAAAAAAAAAAAAAAAAAAAA";
    static final String NEW = "BBBBBBBBBBBBBBBBBBBBBB";

    final MockProducer<byte[], byte[]> producer =
            new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());

    static String named(ProducerRecord<byte[], byte[]> record) {
        Header header = record.headers().lastHeader(TargetTopicIds.HEADER);
        return header == null ? null : new String(header.value(), StandardCharsets.UTF_8);
    }

    static long runsBefore(ProducerRecord<byte[], byte[]> record) {
        Header header = record.headers().lastHeader(OffsetSyncWriter.RUNS_BEFORE_HEADER);
        return header == null ? 0 : header.value().length / (3 * Long.BYTES);
    }

    static long earlierRuns(ProducerRecord<byte[], byte[]> record) {
        Header header = record.headers().lastHeader(OffsetSyncWriter.EARLIER_RUNS_HEADER);
        return header == null ? 0 : header.value().length / (3 * Long.BYTES);
    }

    @Test
    void syncsNameTheTargetTopicsIdOnceKnownAndARecreatedTopicsRunsAreForgotten() {
        OffsetSyncWriter writer = new OffsetSyncWriter(producer, OffsetSyncWriterTest.SYNCS, 100, 1000, new Stats(),
                false);
        TargetTopicIds ids = writer.nameTargetTopics(Map.of("bootstrap.servers", "127.0.0.1:1"), "");
        try {
            writer.acked(OffsetSyncWriterTest.ORDERS, 0, 0);
            writer.acked(OffsetSyncWriterTest.ORDERS, 1, 1);  // before the id is known: named as unknown
            ids.seen("orders", OLD);  // the first id: the run's furthest sync again, naming it
            writer.acked(OffsetSyncWriterTest.ORDERS, 2, 2);  // the same run
            writer.acked(OffsetSyncWriterTest.ORDERS, 10, 5);  // another
            ids.seen("orders", NEW);  // deleted and recreated
            writer.acked(OffsetSyncWriterTest.ORDERS, 11, 0);
            writer.sendQueued();
            List<ProducerRecord<byte[], byte[]>> syncs = producer.history();
            assertEquals(List.of("orders:3 0→0 run 0", "orders:3 1→1 run 0", "orders:3 2→2 run 0",
                    "orders:3 10→5 run 10 after 2→2 run 0", "orders:3 11→0 run 11"),
                    syncs.stream().map(TargetTopicIdsTest::runs).toList());
            assertEquals(List.of(OffsetSyncWriter.UNSURE, OLD, OLD, OLD, NEW),
                    syncs.stream().map(TargetTopicIdsTest::named).toList());
            assertEquals(List.of(0L, 0L, 0L, 0L, 2L), syncs.stream().map(TargetTopicIdsTest::runsBefore).toList(),
                    "the runs made before the recreation, carried as runs from before");
            assertEquals(0, earlierRuns(syncs.get(4)), "the old incarnation's runs still carried as the new one's");
            assertEquals(11, ByteBuffer.wrap(syncs.get(4).headers().lastHeader(OffsetSyncWriter.RUN_START_HEADER)
                    .value()).getLong());
        } finally {
            writer.releaseTargetTopics();
        }
    }

    /** A sync as the writer's tests describe it, without the headers this test reads itself. */
    static String runs(ProducerRecord<byte[], byte[]> record) {
        ProducerRecord<byte[], byte[]> bare = new ProducerRecord<>(record.topic(), record.partition(), record.key(),
                record.value());
        record.headers().forEach(h -> {
            if (h.key().equals(OffsetSyncWriter.RUN_START_HEADER) || h.key().equals(OffsetSyncWriter.EARLIER_RUNS_HEADER)) {
                bare.headers().add(h);
            }
        });
        return OffsetSyncWriterTest.describe(bare);
    }

    @Test
    void onlyAChangedIdIsARecreationAndTheFirstIdIsLearnedOnce() {
        List<String> recreated = new ArrayList<>();
        List<String> learned = new ArrayList<>();
        try (TargetTopicIds ids = new TargetTopicIds(Map.of(), "us.", recreated::add, learned::add)) {
            assertNull(ids.of("orders"));
            ids.seen("orders", OLD);
            ids.seen("orders", OLD);
            assertEquals(OLD, ids.of("orders"));
            assertEquals(List.of(), recreated);
            assertEquals(List.of("orders"), learned);
            ids.seen("orders", NEW);
            assertEquals(List.of("orders"), recreated);
            assertEquals(List.of("orders"), learned);
            assertEquals(NEW, ids.of("orders"));
        }
    }
}
