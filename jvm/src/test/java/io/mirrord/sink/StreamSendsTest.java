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

import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

/** A stream's sends at least once, on a producer whose acknowledgements the test gives one by one. */
public class StreamSendsTest {
    final Stats stats = new Stats();
    final SendsFixture f = new SendsFixture(stats);

    /** The acknowledged positions, as this test's Stats saw them: {@code "positions":{"orders":{"4":11}}. */
    String positions() {
        String json = stats.toJson();
        String positions = json.substring(json.indexOf("\"positions\":"));
        return positions.substring(0, positions.indexOf('}') + 1);
    }

    List<String> syncs() {
        f.sends.syncs().flushPending();
        f.sends.syncs().sendQueued();
        return f.syncs();
    }

    @Test
    void aRecordIsBuiltOnceFromTheRowIntoTheSamePartitionOfTheTargetTopicNamedOnce() {
        RecordHeaders headers = new RecordHeaders();
        headers.add("trace", new byte[] {2});
        headers.add("__mirrord", null);
        headers.add("trace", new byte[] {3});
        byte[] key = {7, 8};
        byte[] value = {4, 5, 6};
        f.sends.send(f.sends.partitions().of(new String("orders"), 2), 42, 1_700_000_000_123L, key, value, headers);
        f.sends.send(f.sends.partitions().of(new String("orders"), 2), 43, null, null, null, null);

        List<ProducerRecord<byte[], byte[]>> records = f.records();
        ProducerRecord<byte[], byte[]> first = records.get(0);
        assertEquals(SendsFixture.TARGET, first.topic());
        assertSame(first.topic(), records.get(1).topic(), "the target topic's name is made once, not per record");
        assertEquals(2, first.partition());
        assertEquals(1_700_000_000_123L, first.timestamp());
        assertSame(key, first.key());
        assertSame(value, first.value());
        assertEquals(headers, first.headers());
        ProducerRecord<byte[], byte[]> second = records.get(1);
        assertNull(second.key());
        assertNull(second.value());
        assertNull(second.timestamp(), "an unknown timestamp is left to the producer");
        assertEquals(0, second.headers().toArray().length);
    }

    @Test
    void thePositionIsTheAcknowledgedPrefixInTheIncarnationEachRecordWasReadIn() {
        TopicPartition source = new TopicPartition("orders", 3);
        Incarnations.set(source, 7);
        f.send(3, 50);
        f.send(3, 51);
        assertEquals(2, f.sends.inFlight());
        assertEquals("\"positions\":{}", positions());
        Incarnations.set(source, 8);  // the topic was recreated: its reader reads the new one
        f.send(3, 0);
        f.ack();
        f.ack();
        assertArrayEquals(new long[] {7, 52}, stats.drain().positions.get("orders").get(3));
        f.ack();  // acknowledged after the change, read before it: the old one would be wrong
        assertArrayEquals(new long[] {8, 1}, stats.drain().positions.get("orders").get(3));
        assertEquals(0, f.sends.inFlight());
    }

    @Test
    void aFailedSendStopsThePositionAlsoForALaterRecordAcknowledgedBeforeTheTaskSawTheFailure() {
        Incarnations.set(new TopicPartition("orders", 4), 2);
        f.send(4, 10);
        f.ack();
        assertEquals("\"positions\":{\"orders\":{\"4\":11}", positions());
        f.send(4, 11);
        f.send(4, 12);  // sent before the producer's I/O thread failed 11: the task had not seen it yet
        f.fail();
        f.ack();  // the target took 12
        assertEquals("\"positions\":{\"orders\":{\"4\":11}", positions());
        KafkaException seen = assertThrows(KafkaException.class, () -> f.send(4, 13));
        assertTrue(seen.getMessage().contains("record 11 of orders-4"), seen.getMessage());
        assertThrows(KafkaException.class, f.sends::taskEnded, "the batch's end fails the task");
        assertFalse(f.sends.taskFailed(), "a sender with a failed send serves no further task");
        assertEquals("\"positions\":{\"orders\":{\"4\":11}", positions());
    }

    @Test
    void aFailureOnOnePartitionLeavesTheOthersPositionsAndSyncsAlone() {
        f.send(0, 0);
        f.send(1, 0);
        f.send(0, 1);
        f.send(1, 1);
        f.fail();  // 0:0
        f.ack();
        f.ack();
        f.ack();
        assertEquals("\"positions\":{\"orders\":{\"1\":2}", positions());
        assertEquals(List.of("orders:1 0→0 run 0", "orders:1 1→1 run 0"), syncs());
    }

    @Test
    void aSenderClosedInATaskTheQuerysStopInterruptedWaitsForItsProducerUninterrupted() {
        // a stop interrupts the task while it flushes its batch's end; its catch closes the stream's sender
        List<String> closes = new ArrayList<>();
        SendsFixture stopped = new SendsFixture(stats, Long.MAX_VALUE,
                SendsFixture.closing(closes, SendsFixture.target(), false));
        stopped.send(0, 5);
        Thread.currentThread().interrupt();
        try {
            stopped.close();
        } finally {
            assertTrue(Thread.interrupted(), "the task's interrupt is left as it was");
        }
        // the buffered record and the delayed syncs have the close's whole wait, and Kafka no ERROR to print
        assertEquals(List.of(StreamSends.CLOSE_TIMEOUT + " uninterrupted"), closes);
    }

    @Test
    void aTasksEndWaitsForEveryRecordAndKeepsAHealthySender() {
        f.send(0, 5);
        f.send(0, 6);
        f.sends.taskEnded();  // MockProducer's flush completes what is in flight
        assertEquals("\"positions\":{\"orders\":{\"0\":7}", positions());
        assertTrue(f.sends.taskFailed(), "a task failed for another reason: the sender goes on");
        assertTrue(stats.toJson().startsWith("{\"topics\":{\"src.orders\":{\"records\":2,\"bytes\":6}},"),
                stats.toJson());
    }

    @Test
    void sourceAndTargetOffsetsArePairedPerPartitionInTheCallbacks() {
        for (int i = 0; i < 3; i++) {
            f.send(0, 100 + i);
            f.send(1, 200 + 2 * i);
        }
        for (int i = 0; i < 6; i++) {
            f.ack();
        }
        assertEquals(List.of("orders:0 100→0 run 100", "orders:1 200→0 run 200", "orders:1 202→1 run 202 after 200→0 "
                + "run 200", "orders:1 204→2 run 204 after 200→0 run 200, 202→1 run 202", "orders:0 102→2 run 100"),
                syncs());
    }

    @Test
    void aFailureEndsThePartitionsRunAndNoSyncIsWrittenUntilWhatWasInFlightIsThrough() {
        for (int i = 0; i < 4; i++) {
            f.send(0, i);
        }
        f.ack();
        f.ack();  // pending 1→1
        f.fail();  // record 2: the pending sync is emitted (docs/decisions.md §7), the partition broken
        f.ack();  // record 3: still broken
        assertEquals(List.of("orders:0 0→0 run 0", "orders:0 1→1 run 0"), syncs());
    }
}
