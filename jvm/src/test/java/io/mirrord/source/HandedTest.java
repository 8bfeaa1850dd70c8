package io.mirrord.source;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** A reader's polls, counted for the commits' pace (docs/decisions.md §12): short when the source had no more ready. */
public class HandedTest {
    static final TopicPartition ORDERS = new TopicPartition("orders", 0);

    static void add(MockConsumer<byte[], byte[]> consumer, long from, int count) {
        for (long offset = from; offset < from + count; offset++) {
            consumer.addRecord(new ConsumerRecord<>("orders", 0, offset, null, new byte[] {1}));
        }
    }

    @Test
    void aPollThatReturnsAllItMayIsABacklogsAndOneThatReturnsLessIsShort() throws Exception {
        MockConsumer<byte[], byte[]> consumer = new MockConsumer<>(OffsetResetStrategy.EARLIEST);
        consumer.assign(List.of(ORDERS));
        consumer.updateBeginningOffsets(Map.of(ORDERS, 0L));
        Handed handed = Handed.onThisThread();
        long polls = handed.polls();
        long dryOnes = handed.dryPolls();
        add(consumer, 0, 3);
        assertEquals(3, handed.poll(consumer, 0, 3).count());  // as many as a poll may return: more may be ready
        add(consumer, 3, 2);
        assertEquals(2, handed.poll(consumer, 0, 3).count());  // fewer: the source had no more
        assertEquals(0, handed.poll(consumer, 0, 3).count());
        assertEquals(3, handed.polls() - polls);
        assertEquals(2, handed.dryPolls() - dryOnes);
    }

    @Test
    void aPollThatReturnsLessWhileTheSourceHoldsMoreOfItsPartitionsIsABacklogs() throws Exception {
        MockConsumer<byte[], byte[]> consumer = new MockConsumer<>(OffsetResetStrategy.EARLIEST);
        consumer.assign(List.of(ORDERS));
        consumer.updateBeginningOffsets(Map.of(ORDERS, 0L));
        consumer.updateEndOffsets(Map.of(ORDERS, 10L));  // the fetch's high watermark: ten records at the source
        Handed handed = Handed.onThisThread();
        long dryOnes = handed.dryPolls();
        add(consumer, 0, 2);  // records of 1 KiB: a partition's fetch is full at two, fewer than a poll may return
        assertEquals(2, handed.poll(consumer, 0, 3).count());
        assertEquals(0, handed.dryPolls() - dryOnes, "the source had eight more: a backlog's poll");
        add(consumer, 2, 2);
        consumer.updateEndOffsets(Map.of(ORDERS, 4L));
        assertEquals(2, handed.poll(consumer, 0, 3).count());
        assertEquals(1, handed.dryPolls() - dryOnes, "nothing more at the source: it keeps up");
    }
}
