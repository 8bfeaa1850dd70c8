package io.mirrord.sink;

import io.mirrord.metrics.Stats;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

public class OffsetSyncWriterTest {
    public static final String SYNCS = "mm2-offset-syncs.target.internal";
    static final TopicPartition ORDERS = new TopicPartition("orders", 3);

    final MockProducer<byte[], byte[]> producer = new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());
    final Stats stats = new Stats();

    OffsetSyncWriter writer(long offsetLagMax) {
        return new OffsetSyncWriter(producer, SYNCS, offsetLagMax, 1000, stats, false);
    }

    /** Sends what the writer emitted and returns every sync written so far as "topic:partition u→d run r". */
    static List<String> written(OffsetSyncWriter writer, MockProducer<byte[], byte[]> producer) {
        writer.sendQueued();
        List<String> syncs = new ArrayList<>();
        for (ProducerRecord<byte[], byte[]> record : producer.history()) {
            syncs.add(describe(record));
        }
        return syncs;
    }

    /** Every sync written so far, as {@link #written}, without sending what was emitted. */
    static List<String> describeAll(MockProducer<byte[], byte[]> producer) {
        List<String> syncs = new ArrayList<>();
        producer.history().forEach(record -> syncs.add(describe(record)));
        return syncs;
    }

    static String describe(ProducerRecord<byte[], byte[]> record) {
        assertEquals(SYNCS, record.topic());
        assertEquals(0, record.partition());
        ByteBuffer key = ByteBuffer.wrap(record.key());
        byte[] topic = new byte[key.getShort()];
        key.get(topic);
        int partition = key.getInt();
        assertEquals(Long.BYTES, key.remaining());  // the writer's id
        ByteBuffer value = ByteBuffer.wrap(record.value());
        long upstream = value.getLong();
        long downstream = value.getLong();
        assertEquals(0, value.remaining());
        Header[] headers = record.headers().toArray();
        assertEquals(OffsetSyncWriter.RUN_START_HEADER, headers[0].key());
        long runStart = ByteBuffer.wrap(headers[0].value()).getLong();
        StringBuilder earlier = new StringBuilder();
        if (headers.length > 1) {
            assertEquals(2, headers.length);
            assertEquals(OffsetSyncWriter.EARLIER_RUNS_HEADER, headers[1].key());
            ByteBuffer runs = ByteBuffer.wrap(headers[1].value());
            while (runs.hasRemaining()) {
                earlier.append(earlier.isEmpty() ? " after " : ", ")
                        .append(runs.getLong()).append("→").append(runs.getLong()).append(" run ").append(runs.getLong());
            }
        }
        return new String(topic, StandardCharsets.UTF_8) + ":" + partition + " " + upstream + "→" + downstream
                + " run " + runStart + earlier;
    }

    static void ackRun(OffsetSyncWriter writer, TopicPartition source, long upstream, long downstream, int count) {
        for (int i = 0; i < count; i++) {
            writer.acked(source, upstream + i, downstream + i);
        }
    }

    @Test
    void contiguousRunWritesOneSyncThenItsLastRecordOnFlush() {
        OffsetSyncWriter writer = writer(100);
        ackRun(writer, ORDERS, 10, 0, 10);
        assertEquals(List.of("orders:3 10→0 run 10"), written(writer, producer));
        writer.flushPending();
        assertEquals(List.of("orders:3 10→0 run 10", "orders:3 19→9 run 10"), written(writer, producer));
        writer.flushPending();
        assertEquals(2, written(writer, producer).size());
    }

    /** Three transactions of five records, a commit marker after each taking one target offset (docs/decisions.md
     * §12); {@code flushAtCommits}: the delayed syncs emitted at each commit, as {@code StreamTransactions} does. */
    List<String> threeTransactions(boolean flushAtCommits) {
        OffsetSyncWriter writer = writer(100);
        for (int txn = 0; txn < 3; txn++) {
            ackRun(writer, ORDERS, 5L * txn, 6L * txn, 5);
            if (flushAtCommits) {
                writer.flushPending();
            }
        }
        writer.flushPending();
        return written(writer, producer);
    }

    @Test
    void flushingAtEachCommitWritesEachRunsEndThereAndNoSyncMore() {
        List<String> atCommits = threeTransactions(true);
        producer.clear();
        List<String> later = threeTransactions(false);
        assertEquals(later.size(), atCommits.size());
        assertEquals(List.of("orders:3 0→0 run 0", "orders:3 4→4 run 0",
                "orders:3 5→6 run 5 after 4→4 run 0", "orders:3 9→10 run 5 after 4→4 run 0",
                "orders:3 10→12 run 10 after 4→4 run 0, 9→10 run 5", "orders:3 14→16 run 10 after 4→4 run 0, 9→10 run 5"),
                atCommits);
    }

    @Test
    void aRunLongerThanOffsetLagMaxIsSyncedEveryLagMaxRecords() {
        OffsetSyncWriter writer = writer(5);
        ackRun(writer, ORDERS, 0, 0, 21);
        // MirrorMaker 2: downstream - (lastSyncedDownstream + 1) >= offset.lag.max
        assertEquals(List.of("orders:3 0→0 run 0", "orders:3 6→6 run 0", "orders:3 12→12 run 0",
                "orders:3 18→18 run 0"), written(writer, producer));
        writer.flushPending();
        assertEquals("orders:3 20→20 run 0", written(writer, producer).get(4));
    }

    @Test
    void aFlushedSyncCountsForOffsetLagMax() {
        OffsetSyncWriter writer = writer(5);
        ackRun(writer, ORDERS, 0, 0, 4);
        writer.flushPending();  // 3→3
        ackRun(writer, ORDERS, 4, 4, 6);
        assertEquals(List.of("orders:3 0→0 run 0", "orders:3 3→3 run 0", "orders:3 9→9 run 0"), written(writer, producer));
    }

    @Test
    void anUpstreamGapEndsTheRunAndStartsANewOne() {
        OffsetSyncWriter writer = writer(100);
        ackRun(writer, ORDERS, 0, 0, 3);
        ackRun(writer, ORDERS, 5, 3, 2);  // 3 and 4 compacted away or deleted
        writer.flushPending();
        assertEquals(List.of("orders:3 0→0 run 0", "orders:3 2→2 run 0", "orders:3 5→3 run 5 after 2→2 run 0",
                "orders:3 6→4 run 5 after 2→2 run 0"),
                written(writer, producer));
    }

    @Test
    void aDownstreamGapFromAnotherWriterEndsTheRun() {
        OffsetSyncWriter writer = writer(100);
        ackRun(writer, ORDERS, 0, 0, 2);
        ackRun(writer, ORDERS, 2, 5, 2);
        assertEquals(List.of("orders:3 0→0 run 0", "orders:3 1→1 run 0", "orders:3 2→5 run 2 after 1→1 run 0"), written(writer, producer));
    }

    @Test
    void aRewoundTargetEndsTheRun() {
        OffsetSyncWriter writer = writer(100);
        ackRun(writer, ORDERS, 0, 10, 2);
        assertFalse(writer.state(ORDERS).wentBack());
        writer.acked(ORDERS, 2, 0);  // target topic recreated: the writer asks the target for its id at once
        assertTrue(writer.state(ORDERS).wentBack());
        writer.acked(ORDERS, 3, 1);
        assertFalse(writer.state(ORDERS).wentBack());
        assertEquals(List.of("orders:3 0→10 run 0", "orders:3 1→11 run 0", "orders:3 2→0 run 2 after 1→11 run 0"), written(writer, producer));
    }

    @Test
    void aRepeatedUpstreamOffsetEndsTheRun() {
        OffsetSyncWriter writer = writer(100);
        ackRun(writer, ORDERS, 0, 0, 3);
        ackRun(writer, ORDERS, 1, 3, 1);  // Spark retried the task: records again
        assertEquals(List.of("orders:3 0→0 run 0", "orders:3 2→2 run 0", "orders:3 1→3 run 1 after 2→2 run 0"), written(writer, producer));
    }

    @Test
    void partitionsKeepTheirOwnRuns() {
        OffsetSyncWriter writer = writer(100);
        TopicPartition other = new TopicPartition("orders", 4);
        writer.acked(ORDERS, 0, 0);
        writer.acked(other, 7, 0);
        writer.acked(ORDERS, 1, 1);
        writer.acked(other, 8, 1);
        assertEquals(List.of("orders:3 0→0 run 0", "orders:4 7→0 run 7"), written(writer, producer));
    }

    @Test
    void resetEmitsThePendingSyncAndTheNextRecordStartsAfresh() {
        OffsetSyncWriter writer = writer(100);
        ackRun(writer, ORDERS, 0, 0, 3);
        writer.reset(writer.state(ORDERS));  // 1 and 2 were acknowledged: a sync must show them
        writer.flushPending();
        writer.reset(writer.state(ORDERS));  // nothing pending: nothing more
        writer.acked(ORDERS, 3, 3);  // contiguous, but the run was forgotten
        assertEquals(List.of("orders:3 0→0 run 0", "orders:3 2→2 run 0", "orders:3 3→3 run 3 after 2→2 run 0"),
                written(writer, producer));
    }

    @Test
    void recordIsMirrorMaker2sOffsetSyncWithTheRunStartHeader() {
        ProducerRecord<byte[], byte[]> record =
                new OffsetSync(ORDERS, 0x0102L, 0x0304L, 0x0a0bL).toRecord(SYNCS, 0x0c0dL);
        HexFormat hex = HexFormat.of();
        // STRING "orders" (INT16 length 6 + UTF-8), INT32 3: MirrorMaker 2's key; INT64 the writer's id
        assertEquals("0006" + "6f7264657273" + "00000003" + "0000000000000c0d", hex.formatHex(record.key()));
        // INT64 upstream, INT64 downstream
        assertEquals("0000000000000102" + "0000000000000304", hex.formatHex(record.value()));
        Header[] headers = record.headers().toArray();
        assertEquals(1, headers.length);
        assertEquals("mirrord.run.start", headers[0].key());
        assertEquals("0000000000000a0b", hex.formatHex(headers[0].value()));
        assertEquals(0, record.partition());
        assertEquals(null, record.timestamp());
    }

    @Test
    void eachSyncCarriesTheWritersEarlierRunsAndTheTwoLowestMergeBeyondEight() {
        OffsetSyncWriter writer = writer(100);
        for (int run = 0; run < 10; run++) {  // ten runs of two records, each rewinding by one
            writer.acked(ORDERS, 10L * run, 3L * run);
            writer.acked(ORDERS, 10L * run + 1, 3L * run + 1);
            writer.reset(writer.state(ORDERS));
        }
        writer.acked(ORDERS, 500, 100);
        List<String> syncs = written(writer, producer);
        // ten runs, eight kept: runs 0, 1 and 2 (first records at 0, 3 and 6) merged into one record at 21, at 0;
        // the later ones as they were
        assertEquals("orders:3 500→100 run 500 after 21→0 run 21, 31→10 run 30, 41→13 run 40, 51→16 run 50, "
                + "61→19 run 60, 71→22 run 70, 81→25 run 80, 91→28 run 90", syncs.get(syncs.size() - 1));
        // the first run's syncs carry nothing: a writer that never rewinds writes MirrorMaker 2's record as before
        assertEquals(1, producer.history().get(0).headers().toArray().length);
    }

    @Test
    void everyWriterHasAKeyOfItsOwnAfterMirrorMaker2sKey() {
        MockProducer<byte[], byte[]> other = new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());
        OffsetSyncWriter first = writer(100);
        OffsetSyncWriter second = new OffsetSyncWriter(other, SYNCS, 100, 1000, stats, false);
        first.acked(ORDERS, 0, 0);
        second.acked(ORDERS, 0, 1);
        first.sendQueued();
        second.sendQueued();
        byte[] a = producer.history().get(0).key();
        byte[] b = other.history().get(0).key();
        byte[] mm2 = new OffsetSync(ORDERS, 0, 0, 0).key();
        assertArrayEquals(mm2, java.util.Arrays.copyOf(a, mm2.length));
        assertArrayEquals(mm2, java.util.Arrays.copyOf(b, mm2.length));
        assertFalse(java.util.Arrays.equals(a, b));
    }

    @Test
    void nonAsciiTopicLengthIsInBytes() {
        byte[] key = new OffsetSync(new TopicPartition("é", 0), 0, 0, 0).key();
        assertEquals("0002c3a900000000", HexFormat.of().formatHex(key));
    }

    @Test
    void writtenAndFailedSyncsAreCounted() {
        MockProducer<byte[], byte[]> manual = new MockProducer<>(false, new ByteArraySerializer(), new ByteArraySerializer());
        OffsetSyncWriter writer = new OffsetSyncWriter(manual, SYNCS, 100, 1000, stats, false);
        writer.acked(ORDERS, 0, 0);
        writer.acked(ORDERS, 5, 1);
        assertEquals(2, writer.sendQueued());
        manual.completeNext();
        manual.errorNext(new RuntimeException("not leader"));
        assertTrue(stats.toJson().contains("\"syncs\":1,\"sync_errors\":1,"), stats.toJson());
        manual.sendException = new IllegalStateException("closed");
        writer.acked(ORDERS, 9, 2);
        writer.sendQueued();
        assertTrue(stats.toJson().contains("\"syncs\":1,\"sync_errors\":2,"), stats.toJson());
    }

    @Test
    void theWritersThreadWritesEmittedSyncsAndFlushesPendingOnesEveryFlushMs() throws Exception {
        OffsetSyncWriter writer = new OffsetSyncWriter(producer, SYNCS, 100, 50, stats, true);
        try {
            ackRun(writer, ORDERS, 0, 0, 3);
            long deadline = System.currentTimeMillis() + 5000;
            while (producer.history().size() < 2 && System.currentTimeMillis() < deadline) {
                Thread.sleep(10);
            }
            List<String> syncs = new ArrayList<>();
            producer.history().forEach(r -> syncs.add(describe(r)));
            assertEquals(List.of("orders:3 0→0 run 0", "orders:3 2→2 run 0"), syncs);
        } finally {
            writer.close(Duration.ofSeconds(5));
        }
    }

    @Test
    void closeWritesPendingSyncsAndClosesTheProducer() {
        OffsetSyncWriter writer = new OffsetSyncWriter(producer, SYNCS, 100, 60_000, stats, true);
        ackRun(writer, ORDERS, 0, 0, 3);
        writer.close(Duration.ofSeconds(5));
        List<String> syncs = describeAll(producer);
        // the first sync is written by the thread's batch or, with the delayed one, left out of close's batch
        assertTrue(syncs.equals(List.of("orders:3 0→0 run 0", "orders:3 2→2 run 0"))
                || syncs.equals(List.of("orders:3 2→2 run 0")), syncs.toString());
        assertTrue(producer.closed());
    }

    @Test
    void aBatchWritesOnlyTheFurthestSyncOfEachRunItHolds() {
        MockProducer<byte[], byte[]> all = new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());
        OffsetSyncWriter every = new OffsetSyncWriter(all, SYNCS, 100, 1000, stats, false);
        OffsetSyncWriter batched = writer(100);
        TopicPartition other = new TopicPartition("orders", 4);
        for (OffsetSyncWriter w : List.of(every, batched)) {
            ackRun(w, ORDERS, 0, 0, 250);  // syncs every 100 records
            ackRun(w, other, 0, 0, 2);
            ackRun(w, ORDERS, 0, 250, 5);  // a rewind to the run's first record: a new run from the same offset
            ackRun(w, ORDERS, 300, 255, 5);  // a gap: another run
            w.flushPending();
        }
        every.sendQueued();
        assertEquals(List.of("orders:3 0→0 run 0", "orders:3 101→101 run 0", "orders:3 202→202 run 0",
                "orders:4 0→0 run 0", "orders:3 249→249 run 0", "orders:3 0→250 run 0 after 249→249 run 0",
                "orders:3 4→254 run 0 after 249→249 run 0", "orders:3 300→255 run 300 after 4→254 run 0, 249→249 run 0",
                "orders:3 304→259 run 300 after 4→254 run 0, 249→249 run 0", "orders:4 1→1 run 0"),
                describeAll(all));
        assertEquals(4, batched.sendCoalesced(null));
        assertEquals(List.of("orders:3 249→249 run 0", "orders:3 4→254 run 0 after 249→249 run 0",
                "orders:3 304→259 run 300 after 4→254 run 0, 249→249 run 0", "orders:4 1→1 run 0"),
                describeAll(producer));
        assertTrue(batched.flush(Duration.ofSeconds(1)), "the syncs left out count as done");
    }

    @Test
    void flushWritesTheDelayedSyncsAndWaitsUntilEverySyncIsAcknowledgedOrFailed() throws Exception {
        MockProducer<byte[], byte[]> manual = new MockProducer<>(false, new ByteArraySerializer(), new ByteArraySerializer());
        OffsetSyncWriter writer = new OffsetSyncWriter(manual, SYNCS, 100, 60_000, stats, true);
        try {
            ackRun(writer, ORDERS, 0, 0, 1);
            ackRun(writer, new TopicPartition("orders", 4), 0, 0, 1);
            assertFalse(writer.flush(Duration.ofMillis(50)));  // written by the writer's thread, not yet acknowledged
            CompletableFuture<Boolean> flushed = CompletableFuture.supplyAsync(() -> writer.flush(Duration.ofSeconds(5)));
            long deadline = System.currentTimeMillis() + 5000;
            while (manual.history().size() < 2 && System.currentTimeMillis() < deadline) {
                Thread.sleep(10);
            }
            assertEquals(List.of("orders:3 0→0 run 0", "orders:4 0→0 run 0"), describeAll(manual));
            manual.completeNext();
            assertFalse(flushed.isDone());
            manual.errorNext(new RuntimeException("not leader"));
            assertTrue(flushed.get(5, TimeUnit.SECONDS));
            assertTrue(stats.toJson().contains("\"syncs\":1,\"sync_errors\":1,"), stats.toJson());
        } finally {
            writer.close(Duration.ofSeconds(5));
        }
    }
}
