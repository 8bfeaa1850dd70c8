package io.mirrord.sink;

import io.mirrord.positions.Incarnations;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

public class CommittedPositionsTest {
    static final TopicPartition PAYMENTS = new TopicPartition("payments.eu", 3);

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void aPositionReadsBackAsWritten() {
        assertEquals(PAYMENTS, CommittedPositions.partitionOf(CommittedPositions.key(PAYMENTS)));
        assertEquals(new CommittedPositions.Position(42, "AbC-d_1"),
                CommittedPositions.parse(CommittedPositions.value(42, "AbC-d_1")));
        assertEquals(new CommittedPositions.Position(7, null), CommittedPositions.parse(CommittedPositions.value(7, null)));
        assertEquals(new CommittedPositions.Position(9, "x"),
                CommittedPositions.parse(bytes("{\"topicId\": \"x\", \"offset\": 9}")), "as Python's json writes it");
        assertNull(CommittedPositions.parse(bytes("garbage")));
        assertNull(CommittedPositions.partitionOf(bytes("no-partition")));
        assertNull(CommittedPositions.partitionOf(bytes("topic:x")));
    }

    @Test
    void aRerunTaskSkipsTheRecordsBelowTheCommittedPositionOnlyInTheSameTopic() {
        Incarnations.setTopicId(PAYMENTS.topic(), "id-now");
        TopicPartition other = new TopicPartition("payments.eu", 4);
        TopicPartition recreated = new TopicPartition("orders.eu", 0);
        Incarnations.setTopicId(recreated.topic(), "id-now");
        CommittedPositions earlier = new CommittedPositions(Map.of(
                PAYMENTS, new CommittedPositions.Position(100, "id-now"),
                other, new CommittedPositions.Position(10, null),
                recreated, new CommittedPositions.Position(50, "id-before")));
        assertTrue(earlier.copied(PAYMENTS, 98));
        assertTrue(earlier.copied(PAYMENTS, 99));
        assertFalse(earlier.copied(PAYMENTS, 100), "the committed position is the next record to copy");
        assertTrue(earlier.copied(other, 9), "a position without a topic id holds by its offset");
        assertFalse(earlier.copied(recreated, 0), "a position of the topic before it was recreated holds nothing");
        assertEquals(3, earlier.takeSkipped());
        assertEquals(0, earlier.takeSkipped());
        assertEquals(1, earlier.partitions(), "a partition past its position is forgotten");
        assertFalse(earlier.copied(new TopicPartition("new", 0), 0));
        assertFalse(CommittedPositions.none().copied(PAYMENTS, 0));
    }
}
