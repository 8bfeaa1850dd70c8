package io.mirrord.metrics;


import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import org.junit.jupiter.api.Test;

class StatsTest {
    private static final String BOUNDS = "[0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5,5,10,30,60,300,3600]";
    private static final String NO_LATENCY = "[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]";
    private static final String EMPTY = "{\"bounds\":" + BOUNDS + ",\"counts\":" + NO_LATENCY + ",\"sum\":0.000}";
    private static final String NO_TRANSACTION_TIMES = ",\"transaction_seconds\":" + EMPTY + ",\"commit_seconds\":" + EMPTY;

    @Test
    void theExecutorsStatsCountLatencyToo() {
        Stats.EXECUTOR.observeLatencyMs(30);
        Stats.EXECUTOR.addRecord("t");
        Stats totals = new Stats();
        totals.add(Stats.EXECUTOR.drain());
        assertTrue(totals.toJson().contains("\"counts\":[0,0,0,1,"), totals.toJson());
    }

    @Test
    void emptyStatsJson() {
        assertEquals("{\"topics\":{},\"filtered\":{},\"latency\":{\"bounds\":" + BOUNDS + ",\"counts\":" + NO_LATENCY
                + ",\"sum\":0.000},\"syncs\":0,\"sync_errors\":0,\"transactions\":{\"committed\":0,\"aborted\":0}"
                + NO_TRANSACTION_TIMES + ",\"positions\":{}}", new Stats().toJson());
    }

    @Test
    void jsonHasTopicsSortedWithRecordsAndBytes() {
        Stats stats = new Stats();
        stats.addBytes("b", 40);
        stats.addBytes("a", 2);
        stats.addRecord("a");
        stats.addRecord("b");
        stats.addRecord("b");
        stats.addSync();
        stats.addSyncError();
        stats.addSyncError();
        stats.transactionCommitted(120, 30);
        stats.transactionAborted();
        stats.transactionCommitted(1000, 4);
        assertEquals("{\"topics\":{\"a\":{\"records\":1,\"bytes\":2},\"b\":{\"records\":2,\"bytes\":40}},\"filtered\":{},"
                + "\"latency\":{\"bounds\":" + BOUNDS + ",\"counts\":" + NO_LATENCY + ",\"sum\":0.000},"
                + "\"syncs\":1,\"sync_errors\":2,\"transactions\":{\"committed\":2,\"aborted\":1},"
                + "\"transaction_seconds\":{\"bounds\":" + BOUNDS + ",\"counts\":[0,0,0,0,0,1,0,1,0,0,0,0,0,0,0,0],"
                + "\"sum\":1.120},\"commit_seconds\":{\"bounds\":" + BOUNDS
                + ",\"counts\":[1,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0],\"sum\":0.034},\"positions\":{}}",
                stats.toJson());
    }

    @Test
    void droppedRecordsAreCountedPerTransformAndTopicAndTravelInDeltas() throws Exception {
        Stats executor = new Stats();
        executor.addFiltered("sample", "b");
        executor.addFiltered("sample", "a");
        executor.addFiltered("sample", "a");
        executor.addFiltered("no-\"tests\"", "a");
        Stats totals = new Stats();
        Stats.Delta delta = executor.drain();
        assertFalse(delta.isEmpty());
        totals.add(roundTrip(delta));
        assertTrue(executor.drain().isEmpty(), "drained counts are gone from the executor");
        executor.addFiltered("sample", "a");
        totals.add(executor.drain());
        assertTrue(totals.toJson().contains(",\"filtered\":{\"no-\\\"tests\\\"\":{\"a\":1},\"sample\":{\"a\":3,\"b\":1}},"),
                totals.toJson());
    }

    @Test
    void theDroppedUdfIsFalseAndCountsIntoTheExecutorsStats() {
        Stats.EXECUTOR.drain();
        assertFalse(new DroppedUdf().call("mask", "orders"));
        assertTrue(Stats.EXECUTOR.toJson().contains("\"filtered\":{\"mask\":{\"orders\":1}},"), Stats.EXECUTOR.toJson());
    }

    @Test
    void latencyBucketsAreUpperBoundsInclusiveAndNotCumulative() {
        Stats stats = new Stats();
        stats.observeLatencyMs(0);
        stats.observeLatencyMs(5);     // le 0.005
        stats.observeLatencyMs(6);     // le 0.01
        stats.observeLatencyMs(1000);  // le 1
        stats.observeLatencyMs(3_600_001);  // +Inf
        stats.observeLatencyMs(-20);   // clock skew: counted as 0
        assertTrue(stats.toJson().contains("\"counts\":[3,1,0,0,0,0,0,1,0,0,0,0,0,0,0,1],\"sum\":3601.012}"),
                stats.toJson());
    }

    @Test
    void topicNamesAreJsonEscaped() {
        Stats stats = new Stats();
        stats.addRecord("q\"b\\s\n\u0001");
        assertTrue(stats.toJson().contains("{\"q\\\"b\\\\s\\n\\u0001\":{\"records\":1,"), stats.toJson());
    }

    @Test
    void drainMovesCountsAndLeavesZeros() {
        Stats stats = new Stats();
        stats.addRecord("t");
        stats.addBytes("t", 10);
        stats.observeLatencyMs(30);
        stats.addSync();
        stats.transactionAborted();
        stats.transactionCommitted(100, 6);
        Stats.Delta delta = stats.drain();
        assertFalse(delta.isEmpty());
        assertEquals(new Stats().toJson().replace("\"topics\":{}", "\"topics\":{\"t\":{\"records\":0,\"bytes\":0}}"),
                stats.toJson());
        assertTrue(stats.drain().isEmpty());

        Stats totals = new Stats();
        totals.add(delta);
        totals.add(delta);
        assertEquals("{\"topics\":{\"t\":{\"records\":2,\"bytes\":20}},\"filtered\":{},\"latency\":{\"bounds\":" + BOUNDS
                + ",\"counts\":[0,0,0,2,0,0,0,0,0,0,0,0,0,0,0,0],\"sum\":0.060},\"syncs\":2,\"sync_errors\":0,"
                + "\"transactions\":{\"committed\":2,\"aborted\":2},\"transaction_seconds\":{\"bounds\":" + BOUNDS
                + ",\"counts\":[0,0,0,0,2,0,0,0,0,0,0,0,0,0,0,0],\"sum\":0.200},\"commit_seconds\":{\"bounds\":" + BOUNDS
                + ",\"counts\":[0,2,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"sum\":0.012},\"positions\":{}}", totals.toJson());
    }

    @Test
    void countsAddedWhileDrainingAreNeitherLostNorDoubled() throws Exception {
        Stats stats = new Stats();
        Stats totals = new Stats();
        Thread adder = new Thread(() -> {
            for (int i = 0; i < 200_000; i++) {
                stats.addRecord("t");
            }
        });
        adder.start();
        while (adder.isAlive()) {
            totals.add(stats.drain());
        }
        totals.add(stats.drain());
        assertTrue(totals.toJson().contains("\"t\":{\"records\":200000,"), totals.toJson());
    }

    @Test
    void deltaSurvivesJavaSerialization() throws Exception {
        Stats stats = new Stats();
        stats.addRecord("t");
        stats.observeLatencyMs(7);
        Stats totals = new Stats();
        totals.add(roundTrip(stats.drain()));
        assertTrue(totals.toJson().contains("\"t\":{\"records\":1,\"bytes\":0}"), totals.toJson());
        assertTrue(totals.toJson().contains("\"counts\":[0,1,"), totals.toJson());
    }

    /** The delta as the driver gets it: through Java serialization. */
    @Test
    void lostRangesReachTheDriverOnceThroughASerializedDelta() throws Exception {
        Stats executor = new Stats();
        executor.addLost("t\"x", 0, 5, 9, Stats.TOPIC_DELETED);
        executor.addLost("t\"x", 0, 12, 20, Stats.RECORDS_DELETED);
        Stats.Delta delta = roundTrip(executor.drain());
        assertFalse(delta.isEmpty());
        assertEquals("[]", executor.takeLostJson());
        Stats driver = new Stats();
        driver.add(delta);
        assertEquals("[[\"t\\\"x\",0,5,9,\"its topic deleted\"],[\"t\\\"x\",0,12,20,\"retention or delete-records\"]]",
                driver.takeLostJson());
        assertEquals("[]", driver.takeLostJson());
    }

    private static Stats.Delta roundTrip(Stats.Delta delta) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
            out.writeObject(delta);
        }
        try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
            return (Stats.Delta) in.readObject();
        }
    }
}
