package io.mirrord.sink;

import io.mirrord.metrics.Stats;
import io.mirrord.positions.Incarnations;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

public class MirrorInterceptorTest {
    static final String TARGET = "src.orders";

    final MockProducer<byte[], byte[]> syncProducer = new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());
    final Stats stats = new Stats();
    Map<String, Object> syncProducerConfig;

    MirrorInterceptor interceptor(Map<String, Object> settings) {
        MirrorInterceptor interceptor = new MirrorInterceptor(config -> {
            syncProducerConfig = config;
            return syncProducer;
        }, stats, false);
        Map<String, Object> configs = new HashMap<>(Map.of(
                "bootstrap.servers", "target:9092",
                "client.id", "producer-7",
                "interceptor.classes", MirrorInterceptor.class.getName(),
                "key.serializer", ByteArraySerializer.class.getName(),
                "value.serializer", ByteArraySerializer.class.getName(),
                "security.protocol", "SSL",
                MirrorInterceptor.SOURCE_TOPIC_PREFIX, "src."));
        configs.putAll(settings);
        interceptor.configure(configs);
        return interceptor;
    }

    MirrorInterceptor withSyncs() {
        return interceptor(Map.of(MirrorInterceptor.SYNCS_TOPIC, OffsetSyncWriterTest.SYNCS));
    }

    public static ProducerRecord<byte[], byte[]> sent(MirrorInterceptor interceptor, int partition, long sourceOffset) {
        return interceptor.onSend(new ProducerRecord<>(TARGET, partition, null,
                Envelope.wrap(new byte[] {1}, 1_000, sourceOffset, 0), new byte[] {2, 3}));
    }

    public static void acked(MirrorInterceptor interceptor, int partition, long targetOffset) {
        interceptor.onAcknowledgement(new RecordMetadata(new TopicPartition(TARGET, partition), targetOffset, 0,
                System.currentTimeMillis(), 1, 2), null);
    }

    static void failed(MirrorInterceptor interceptor, int partition) {
        // what Kafka passes for a failed batch and for a failure within send()
        interceptor.onAcknowledgement(new RecordMetadata(new TopicPartition(TARGET, partition), -1, -1,
                RecordBatch.NO_TIMESTAMP, -1, -1), new TimeoutException("expired"));
    }

    List<String> syncs(MirrorInterceptor interceptor) {
        return OffsetSyncWriterTest.written(interceptor.writer(), syncProducer);
    }

    @Test
    void eachAcknowledgementNamesTheIncarnationItsRecordWasReadInWhenItWasSent() {
        MirrorInterceptor interceptor = interceptor(Map.of());
        TopicPartition source = new TopicPartition("orders", 3);
        Incarnations.set(source, 7);
        sent(interceptor, 3, 50);
        sent(interceptor, 3, 51);
        Incarnations.set(source, 8);  // the topic was recreated: its reader reads the new one
        sent(interceptor, 3, 0);
        acked(interceptor, 3, 0);
        acked(interceptor, 3, 1);
        assertArrayEquals(new long[] {7, 52}, stats.drain().positions.get("orders").get(3));
        acked(interceptor, 3, 2);  // acknowledged after the change, read before it: the old one would be wrong
        assertArrayEquals(new long[] {8, 1}, stats.drain().positions.get("orders").get(3));
    }

    /** The acknowledged positions, as this test's Stats saw them: {@code "positions":{"orders":{"4":11}}. */
    String positions() {
        String json = stats.toJson();
        String positions = json.substring(json.indexOf("\"positions\":"));
        return positions.substring(0, positions.indexOf('}') + 1);
    }

    @Test
    void aFailedSendStopsThePositionUntilTheQuerySendsFromTheFailedRecordAgain() {
        MirrorInterceptor interceptor = interceptor(Map.of());
        Incarnations.set(new TopicPartition("orders", 4), 2);
        sent(interceptor, 4, 10);
        acked(interceptor, 4, 0);
        assertEquals("\"positions\":{\"orders\":{\"4\":11}", positions());
        sent(interceptor, 4, 11);
        failed(interceptor, 4);  // the producer's I/O thread; the task has passed checkForErrors already
        sent(interceptor, 4, 12);  // so it sends on, and the target takes it
        acked(interceptor, 4, 1);
        sent(interceptor, 4, 13);
        acked(interceptor, 4, 2);
        sent(interceptor, 4, 14);  // still in flight as the query restarts
        assertEquals("\"positions\":{\"orders\":{\"4\":11}", positions());

        sent(interceptor, 4, 11);  // the restarted query reads from the failed record again
        acked(interceptor, 4, 3);  // 14, sent before the restart: counts for nothing
        assertEquals("\"positions\":{\"orders\":{\"4\":11}", positions());
        acked(interceptor, 4, 4);
        assertEquals("\"positions\":{\"orders\":{\"4\":12}", positions());
    }

    @Test
    void aFailedSendStopsThePositionUntilThePartitionsNextIncarnation() {
        MirrorInterceptor interceptor = interceptor(Map.of());
        TopicPartition source = new TopicPartition("orders", 5);
        Incarnations.set(source, 2);
        sent(interceptor, 5, 30);
        failed(interceptor, 5);
        sent(interceptor, 5, 31);
        acked(interceptor, 5, 0);
        assertEquals("\"positions\":{}", positions());
        Incarnations.set(source, 3);  // recreated: its reader reads the new topic, here from past 30
        sent(interceptor, 5, 40);
        acked(interceptor, 5, 1);
        assertArrayEquals(new long[] {3, 41}, stats.drain().positions.get("orders").get(5));
    }

    @Test
    void thePositionFollowsTheAcknowledgementsInOrderAndStopsAtAFailureUntilItIsSentAgain() {
        MirrorInterceptor interceptor = interceptor(Map.of());
        long elsewhere = MirrorInterceptor.inFlight();  // other tests' interceptors
        sent(interceptor, 1, 40);
        sent(interceptor, 1, 41);
        sent(interceptor, 1, 45);  // 42..44 dropped by a transform: never sent
        assertEquals(elsewhere + 3, MirrorInterceptor.inFlight());
        assertTrue(stats.toJson().contains("\"positions\":{}"), stats.toJson());
        acked(interceptor, 1, 0);
        assertTrue(stats.toJson().contains("\"positions\":{\"orders\":{\"1\":41}}"), stats.toJson());
        acked(interceptor, 1, 1);
        acked(interceptor, 1, 2);
        assertTrue(stats.toJson().contains("\"positions\":{\"orders\":{\"1\":46}}"), stats.toJson());
        assertEquals(elsewhere, MirrorInterceptor.inFlight());

        sent(interceptor, 1, 46);
        sent(interceptor, 1, 47);
        failed(interceptor, 1);
        acked(interceptor, 1, 4);  // after a failure nothing counts until the failed record is sent again
        assertTrue(stats.toJson().contains("\"positions\":{\"orders\":{\"1\":46}}"), stats.toJson());
        sent(interceptor, 1, 46);
        acked(interceptor, 1, 5);
        assertTrue(stats.toJson().contains("\"positions\":{\"orders\":{\"1\":47}}"), stats.toJson());
    }

    @Test
    void onSendRestoresKeyTimestampAndKeepsEverythingElse() {
        MirrorInterceptor interceptor = interceptor(Map.of());
        RecordHeaders headers = new RecordHeaders();
        headers.add("mirrord.run.start", new byte[] {1});
        headers.add("trace", new byte[] {2});
        headers.add("__mirrord", null);
        headers.add("trace", new byte[] {3});
        byte[] value = {4, 5, 6};
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(TARGET, 2, null,
                Envelope.wrap(new byte[] {7, 8}, 1_700_000_000_123L, 42, 1), value, headers);
        Header[] before = headers.toArray();

        ProducerRecord<byte[], byte[]> out = interceptor.onSend(record);

        assertEquals(TARGET, out.topic());
        assertEquals(2, out.partition());
        assertEquals(1_700_000_000_123L, out.timestamp());
        assertArrayEquals(new byte[] {7, 8}, out.key());
        assertSame(value, out.value());
        Header[] after = out.headers().toArray();
        assertEquals(before.length, after.length);
        for (int i = 0; i < before.length; i++) {
            assertSame(before[i], after[i]);
        }
        assertNull(after[2].value());
    }

    @Test
    void onSendRestoresANullKeyAndLeavesAnUnknownTimestampToTheProducer() {
        MirrorInterceptor interceptor = interceptor(Map.of());
        ProducerRecord<byte[], byte[]> out = interceptor.onSend(
                new ProducerRecord<>(TARGET, null, Envelope.wrap(null, -1, 3, 0), null));
        assertNull(out.key());
        assertNull(out.timestamp());
        assertNull(out.partition());
        assertNull(out.value());
    }

    @Test
    void onSendOfAKeyThatIsNoEnvelopeIsAnError() {
        MirrorInterceptor interceptor = interceptor(Map.of());
        ProducerRecord<byte[], byte[]> plain = new ProducerRecord<>(TARGET, 0, new byte[] {1, 2}, new byte[] {3});
        assertThrows(EnvelopeError.class, () -> interceptor.onSend(plain));
    }

    @Test
    void countsBytesOnSendAndRecordsAndLatencyOnSuccessfulAcknowledgement() {
        MirrorInterceptor interceptor = interceptor(Map.of());
        interceptor.onSend(new ProducerRecord<>(TARGET, 0, Envelope.wrap(new byte[] {1, 2}, 1, 0, 0), new byte[10]));
        interceptor.onSend(new ProducerRecord<>(TARGET, 0, Envelope.wrap(null, 1, 1, 0), null));
        interceptor.onAcknowledgement(new RecordMetadata(new TopicPartition(TARGET, 0), 0, 0,
                System.currentTimeMillis() - 2_000, 2, 10), null);
        failed(interceptor, 0);
        assertTrue(stats.toJson().startsWith("{\"topics\":{\"src.orders\":{\"records\":1,\"bytes\":12}},"), stats.toJson());
        assertTrue(stats.toJson().contains("\"counts\":[0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0]"), stats.toJson());
    }

    @Test
    void withoutASyncsTopicNothingIsPairedOrWritten() {
        MirrorInterceptor interceptor = interceptor(Map.of(MirrorInterceptor.SYNCS_TOPIC, ""));
        sent(interceptor, 0, 5);
        acked(interceptor, 0, 0);
        assertNull(interceptor.writer());
        assertNull(syncProducerConfig);
        interceptor.close();
    }

    @Test
    void pairsSourceAndTargetOffsetsPerPartitionInSendOrder() {
        MirrorInterceptor interceptor = withSyncs();
        for (int i = 0; i < 3; i++) {
            sent(interceptor, 0, 100 + i);
            sent(interceptor, 1, 200 + 2 * i);
        }
        for (int i = 0; i < 3; i++) {
            acked(interceptor, 1, 50 + i);
        }
        for (int i = 0; i < 3; i++) {
            acked(interceptor, 0, 10 + i);
        }
        interceptor.writer().flushPending();
        // each sync of a later run carries the writer's earlier runs of its partition
        assertEquals(List.of("orders:1 200→50 run 200", "orders:1 202→51 run 202 after 200→50 run 200",
                "orders:1 204→52 run 204 after 200→50 run 200, 202→51 run 202",
                "orders:0 100→10 run 100", "orders:0 102→12 run 100"), syncs(interceptor));
    }

    @Test
    void aFailureBreaksThePartitionUntilEverythingSentBeforeItIsAcknowledged() {
        MirrorInterceptor interceptor = withSyncs();
        for (int i = 0; i < 6; i++) {
            sent(interceptor, 0, i);
        }
        acked(interceptor, 0, 0);
        acked(interceptor, 0, 1);   // pending 1→1
        failed(interceptor, 0);     // record 2: pending 1→1 emitted (docs/decisions.md §7), partition broken
        acked(interceptor, 0, 2);   // record 3
        acked(interceptor, 0, 3);   // record 4
        interceptor.writer().flushPending();
        assertEquals(List.of("orders:0 0→0 run 0", "orders:0 1→1 run 0"), syncs(interceptor));
        sent(interceptor, 0, 6);
        acked(interceptor, 0, 4);   // record 5
        acked(interceptor, 0, 5);   // record 6: still broken when popped
        sent(interceptor, 0, 7);    // sent after the partition drained
        acked(interceptor, 0, 6);
        assertEquals(List.of("orders:0 0→0 run 0", "orders:0 1→1 run 0", "orders:0 7→6 run 7 after 1→1 run 0"),
                syncs(interceptor));
    }

    @Test
    void aFailureOnOnePartitionLeavesTheOthersAlone() {
        MirrorInterceptor interceptor = withSyncs();
        sent(interceptor, 0, 0);
        sent(interceptor, 0, 1);
        sent(interceptor, 1, 0);
        sent(interceptor, 1, 1);
        acked(interceptor, 1, 0);
        failed(interceptor, 0);
        acked(interceptor, 0, 0);
        acked(interceptor, 1, 1);
        interceptor.writer().flushPending();
        assertEquals(List.of("orders:1 0→0 run 0", "orders:1 1→1 run 0"), syncs(interceptor));
    }

    @Test
    void recordsSentWithoutAPartitionAreNotPaired() {
        MirrorInterceptor interceptor = withSyncs();
        interceptor.onSend(new ProducerRecord<>(TARGET, Envelope.wrap(null, 1, 9, 0), null));
        acked(interceptor, 0, 0);
        sent(interceptor, 0, 10);
        acked(interceptor, 0, 1);
        assertEquals(List.of("orders:0 10→1 run 10"), syncs(interceptor));
    }

    @Test
    void aTargetTopicWithoutThePrefixKeepsItsName() {
        MirrorInterceptor interceptor = withSyncs();
        assertEquals("orders", interceptor.sourceTopic("src.orders"));
        assertEquals("other.orders", interceptor.sourceTopic("other.orders"));
        assertEquals("orders", interceptor(Map.of(MirrorInterceptor.SOURCE_TOPIC_PREFIX, "")).sourceTopic("orders"));
    }

    @Test
    void theSyncsProducerSharesTheClusterSettingsButNotTheDataProducersIdentity() {
        withSyncs();
        assertEquals(Map.of(
                "bootstrap.servers", "target:9092",
                "security.protocol", "SSL",
                "key.serializer", ByteArraySerializer.class.getName(),
                "value.serializer", ByteArraySerializer.class.getName(),
                "acks", "all",
                "enable.idempotence", "true",
                "linger.ms", "200", "batch.size", "65536"), syncProducerConfig);
    }

    @Test
    void offsetLagMaxAndFlushMsAreRead() {
        MirrorInterceptor interceptor = interceptor(Map.of(MirrorInterceptor.SYNCS_TOPIC, OffsetSyncWriterTest.SYNCS,
                MirrorInterceptor.OFFSET_LAG_MAX, "2", MirrorInterceptor.SYNCS_FLUSH_MS, 10));
        for (int i = 0; i < 4; i++) {
            sent(interceptor, 0, i);
            acked(interceptor, 0, i);
        }
        assertEquals(List.of("orders:0 0→0 run 0", "orders:0 3→3 run 0"), syncs(interceptor));
    }

    @Test
    void badSettingsAreConfigErrors() {
        assertThrows(ConfigException.class, () -> interceptor(Map.of(MirrorInterceptor.SYNCS_TOPIC, "s",
                MirrorInterceptor.OFFSET_LAG_MAX, "many")));
        assertThrows(ConfigException.class, () -> interceptor(Map.of(MirrorInterceptor.SYNCS_TOPIC, "s",
                MirrorInterceptor.SYNCS_FLUSH_MS, "0")));
    }

    @Test
    void closeWritesPendingSyncsAndClosesTheSyncsProducer() {
        MirrorInterceptor interceptor = withSyncs();
        sent(interceptor, 0, 0);
        sent(interceptor, 0, 1);
        acked(interceptor, 0, 0);
        acked(interceptor, 0, 1);
        interceptor.close();
        assertEquals(2, syncProducer.history().size());
        assertTrue(syncProducer.closed());
        assertFalse(syncProducerConfig.containsKey(MirrorInterceptor.SOURCE_TOPIC_PREFIX));
    }

    @Test
    void flushAllWritesTheDelayedSyncsOfEveryLiveInterceptor() {
        MirrorInterceptor interceptor = withSyncs();
        for (int i = 0; i < 3; i++) {
            sent(interceptor, 0, 10 + i);
            acked(interceptor, 0, i);
        }
        assertEquals(List.of(), OffsetSyncWriterTest.describeAll(syncProducer));  // emitted, not yet written

        assertTrue(MirrorInterceptor.flushAll(Duration.ofSeconds(5)));

        assertEquals(List.of("orders:0 10→0 run 10", "orders:0 12→2 run 10"), OffsetSyncWriterTest.describeAll(syncProducer));
        assertFalse(syncProducer.closed());
        assertTrue(stats.toJson().contains("\"syncs\":2,\"sync_errors\":0,"), stats.toJson());
        sent(interceptor, 0, 13);
        acked(interceptor, 0, 3);
        assertTrue(MirrorInterceptor.flushAll(5_000));  // py4j's overload
        assertEquals("orders:0 13→3 run 10", OffsetSyncWriterTest.describeAll(syncProducer).get(2));
        interceptor.close();
    }
}
