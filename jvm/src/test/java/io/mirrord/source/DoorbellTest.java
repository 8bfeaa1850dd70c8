package io.mirrord.source;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** A resting stream waits on a bell started from its own positions (docs/decisions.md §9). */
public class DoorbellTest {
    private static final TopicPartition P0 = new TopicPartition("t", 0);
    private static final TopicPartition P1 = new TopicPartition("t", 1);

    private static MockConsumer<byte[], byte[]> stream() {
        MockConsumer<byte[], byte[]> stream = new MockConsumer<>(OffsetResetStrategy.NONE);
        stream.assign(List.of(P0, P1));
        stream.seek(P0, 5);
        stream.seek(P1, 7);
        stream.pause(Set.of(P1));  // micro-batch mode: read to its end, not fetched
        return stream;
    }

    private static ConsumerRecord<byte[], byte[]> record(long offset) {
        return new ConsumerRecord<>("t", 0, offset, new byte[0], new byte[] {1});
    }

    @Test
    void theBellWaitsFromTheStreamsPositionsAndRingsAtTheNextRecord() {
        MockConsumer<byte[], byte[]> stream = stream();
        MockConsumer<byte[], byte[]> bell = new MockConsumer<>(OffsetResetStrategy.NONE);
        AtomicInteger made = new AtomicInteger();
        Doorbell doorbell = new Doorbell(() -> {
            made.incrementAndGet();
            return bell;
        });

        assertEquals(Doorbell.Rang.NO, doorbell.await(stream, 10));
        assertEquals(Set.of(P0), bell.assignment(), "the partitions the stream reads, not the paused one");
        assertEquals(5, bell.position(P0));
        bell.addRecord(record(5));
        assertEquals(Doorbell.Rang.YES, doorbell.await(stream, 10));
        assertEquals(6, bell.position(P0));

        // rung: the next rest starts the bell again from the stream's position, which its own poll has not moved
        assertEquals(Doorbell.Rang.NO, doorbell.await(stream, 10));
        assertEquals(5, bell.position(P0));
        bell.seek(P0, 9);  // as if the bell had fetched on: a rest that goes on is not started again
        assertEquals(Doorbell.Rang.NO, doorbell.await(stream, 10));
        assertEquals(9, bell.position(P0));
        stream.seek(P0, 12);  // the stream read on (or the partitions changed): the bell follows it
        assertEquals(Doorbell.Rang.NO, doorbell.await(stream, 10));
        assertEquals(12, bell.position(P0));
        assertEquals(1, made.get(), "one bell for the stream's life");
    }

    @Test
    void aBellThatCannotBeStartedLeavesTheStreamToRestAsBefore() {
        AtomicInteger tries = new AtomicInteger();
        Doorbell doorbell = new Doorbell(() -> {
            tries.incrementAndGet();
            throw new KafkaException("no such mechanism");
        });
        assertEquals(Doorbell.Rang.UNUSABLE, doorbell.await(stream(), 10));
        assertEquals(Doorbell.Rang.UNUSABLE, doorbell.await(stream(), 10));
        assertEquals(1, tries.get());

        IdlePace pace = new IdlePace(10, doorbell);
        pace.polled(0, false, 1_000, 4_000);
        assertFalse(pace.waitedOnBell(stream(), 1_000, 4_000));
        assertEquals(15, pace.pollMs(1_000, 4_000), "its own one-fetch polls and rests instead");
    }

    @Test
    void aStreamWithABellRestsOnItAfterATenthOfASecondAndPollsInFullAfterItRings() {
        MockConsumer<byte[], byte[]> stream = stream();
        MockConsumer<byte[], byte[]> bell = new MockConsumer<>(OffsetResetStrategy.NONE);
        IdlePace pace = new IdlePace(10, new Doorbell(() -> bell));
        assertFalse(pace.waitedOnBell(stream, 0, 4_000), "not resting yet: the stream polls itself");
        assertEquals(100, pace.pollMs(0, 4_000), "a poll returns in time for the rest");
        pace.polled(0, false, 60, 3_940);
        assertFalse(pace.waitedOnBell(stream, 60, 3_940));
        pace.polled(60, false, 100, 3_900);
        assertTrue(pace.waitedOnBell(stream, 100, 10), "resting: it waited on the bell, no record came");
        bell.addRecord(record(5));
        assertTrue(pace.waitedOnBell(stream, 120, 10));
        assertEquals(100, pace.pollMs(130, 4_000), "rung: full polls again");
        assertFalse(pace.waitedOnBell(stream, 130, 4_000));
        assertEquals(0, pace.polled(130, true, 140, 3_000), "records: no rest");
        pace.polled(140, false, 200, 3_000);
        assertFalse(pace.waitedOnBell(stream, 200, 3_000), "60 ms without a record: not yet");
        pace.polled(200, false, 240, 3_000);
        assertTrue(pace.waitedOnBell(stream, 240, 10), "100 ms: resting again, a stream of heartbeats between them");
    }
}
