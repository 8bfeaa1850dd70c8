package io.mirrord.sink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mirrord.metrics.Stats;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.KafkaException;
import org.junit.jupiter.api.Test;

/**
 * A stream sends no more once the bytes awaiting the target's acknowledgement pass its bound, until acknowledgements
 * make room: the records behind would wait in the producer past their delivery timeout (docs/decisions.md §2).
 */
class QueueBoundTest {
    @Test
    void theBoundIsFourMibPerSecondOfTheDeliveryTimeoutAndNoneWithoutOne() {
        assertEquals(12L << 20, StreamProducers.queueBound(Map.of("delivery.timeout.ms", "3000")));  // election
        assertEquals(7_549_747L, StreamProducers.queueBound(Map.of("delivery.timeout.ms", "1800")));  // a 6 s session
        assertEquals(4L << 20, StreamProducers.queueBound(Map.of("delivery.timeout.ms", "300")));  // the floor
        assertTrue(StreamProducers.queueBound(Map.of("delivery.timeout.ms", "2147483647")) > 1L << 40);  // no election
        assertEquals(Long.MAX_VALUE, StreamProducers.queueBound(Map.of()));
    }

    @Test
    void aSendPastTheBoundWaitsForAnAcknowledgementAndThenGoesOut() throws Exception {
        SendsFixture f = new SendsFixture(new Stats(), 4);  // each record is 3 bytes
        f.send(0, 0);
        f.send(0, 1);  // 3 bytes queued: not past the bound
        assertEquals(6, f.sends.queued());
        CompletableFuture<Void> third = CompletableFuture.runAsync(() -> f.send(0, 2));
        Thread.sleep(100);  // given time, the third send does not go out while 6 bytes await acknowledgement
        assertEquals(2, f.records().size());
        f.ack();
        third.get(5, TimeUnit.SECONDS);
        assertEquals(3, f.records().size());
        assertEquals(6, f.sends.queued());
        f.ack();
        f.ack();
        assertEquals(0, f.sends.queued());
        f.close();
    }

    @Test
    void aFailureEndsTheWaitWithTheFailure() throws Exception {
        SendsFixture f = new SendsFixture(new Stats(), 4);
        f.send(1, 0);
        f.send(1, 1);
        CompletableFuture<Void> third = CompletableFuture.runAsync(() -> f.send(1, 2));
        f.fail();
        Throwable thrown = assertInstanceOf(Exception.class,
                org.junit.jupiter.api.Assertions.assertThrows(Exception.class, () -> third.get(5, TimeUnit.SECONDS)));
        assertInstanceOf(KafkaException.class, thrown.getCause());
        assertEquals(2, f.records().size());
        f.close();
    }
}
