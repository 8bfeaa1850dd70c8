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
            writer.acked(OffsetSyncWriterTest.ORDERS, 0, 0);  // before the id is known: no header
            ids.seen("orders", OLD);
            writer.acked(OffsetSyncWriterTest.ORDERS, 10, 5);  // a new run in the old incarnation
            ids.seen("orders", NEW);  // deleted and recreated
            writer.acked(OffsetSyncWriterTest.ORDERS, 11, 0);
            writer.sendQueued();
            List<ProducerRecord<byte[], byte[]>> syncs = producer.history();
            assertEquals(3, syncs.size());
            assertNull(named(syncs.get(0)));
            assertEquals(OLD, named(syncs.get(1)));
            assertEquals(1, earlierRuns(syncs.get(1)));
            assertEquals(NEW, named(syncs.get(2)));
            assertEquals(0, earlierRuns(syncs.get(2)), "the old incarnation's runs still carried as the new one's");
            assertEquals(2 * 3 * Long.BYTES, syncs.get(2).headers().lastHeader(OffsetSyncWriter.RUNS_BEFORE_HEADER)
                    .value().length);
            assertEquals(11, ByteBuffer.wrap(syncs.get(2).headers().lastHeader(OffsetSyncWriter.RUN_START_HEADER)
                    .value()).getLong());
        } finally {
            writer.releaseTargetTopics();
        }
    }

    @Test
    void onlyAChangedIdIsARecreation() {
        List<String> recreated = new ArrayList<>();
        try (TargetTopicIds ids = new TargetTopicIds(Map.of(), "us.", recreated::add)) {
            assertNull(ids.of("orders"));
            ids.seen("orders", OLD);
            ids.seen("orders", OLD);
            assertEquals(OLD, ids.of("orders"));
            assertEquals(List.of(), recreated);
            ids.seen("orders", NEW);
            assertEquals(List.of("orders"), recreated);
            assertEquals(NEW, ids.of("orders"));
        }
    }
}
