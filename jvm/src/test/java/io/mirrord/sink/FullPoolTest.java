package io.mirrord.sink;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mirrord.metrics.Stats;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.producer.BufferExhaustedException;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A producer whose pool ({@code buffer.memory}) stayed full of batches for {@code max.block.ms}, or that got no metadata
 * for the record's topic within it, refuses a record before appending it, as KafkaProducer does: through its callback,
 * in the sending thread, inside {@code send}. Nothing was sent, so the stream
 * sends the record again, in its place, and neither fails nor restarts (docs/decisions.md §2).
 */
class FullPoolTest {
    /**
     * Refuses the next {@code refusals} records as a full pool does (or, with {@link #metadata}, as a producer that got
     * no metadata for the target topic within {@code max.block.ms}); then a MockProducer's send.
     */
    static final class FullPool extends MockProducer<byte[], byte[]> {
        final AtomicInteger refusals = new AtomicInteger();
        boolean metadata;

        FullPool() {
            super(SendsFixture.target(), false, null, new ByteArraySerializer(), new ByteArraySerializer());
        }

        @Override
        public synchronized Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> record, Callback callback) {
            if (record.topic().equals(SendsFixture.TARGET) && refusals.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                TimeoutException full = metadata
                        ? new TimeoutException("Topic " + record.topic() + " not present in metadata after 1000 ms.")
                        : new BufferExhaustedException("Failed to allocate 262144 bytes within the configured max "
                                + "blocking time 1000 ms");
                callback.onCompletion(null, full);
                return CompletableFuture.failedFuture(full);
            }
            return super.send(record, callback);
        }
    }

    @Test
    void aRecordTheFullPoolRefusedIsSentAgainInItsPlaceAndItsPositionMovesWhenAcknowledged() {
        refusedAndSentAgain(new FullPool());
    }

    @Test
    void aRecordRefusedForWantOfTheTopicsMetadataIsSentAgainInItsPlace() {
        FullPool noMetadata = new FullPool();
        noMetadata.metadata = true;
        refusedAndSentAgain(noMetadata);
    }

    private static void refusedAndSentAgain(FullPool pool) {
        Stats stats = new Stats();
        SendsFixture f = new SendsFixture(stats, Long.MAX_VALUE, pool);
        f.send(0, 0);
        pool.refusals.set(3);  // the pool stays full for three tries of the next record
        f.send(0, 1);
        f.send(0, 2);
        List<Long> timestamps = f.records().stream().map(ProducerRecord::timestamp).toList();
        assertEquals(List.of(1_000L, 1_001L, 1_002L), timestamps);  // each once, in the source's order
        assertArrayEquals(new byte[] {2, 3}, f.records().get(1).value());
        assertEquals(9, f.sends.queued());
        f.ack();
        f.ack();
        f.ack();
        assertEquals(0, f.sends.queued());
        assertEquals(0, f.sends.inFlight());
        f.sends.taskEnded();  // no failure: the task ends, Spark commits the batch
        assertTrue(stats.toJson().startsWith("{\"topics\":{\"src.orders\":{\"records\":3,\"bytes\":9}},"),
                stats.toJson());  // counted once each
        assertEquals(3L, stats.drain().positions.get(SendsFixture.SOURCE).get(0)[1]);
        f.close();
    }

    @Test
    @Timeout(10)  // a failure taken for a refusal would retry for ever
    void anEarlierFailureEndsTheRetries() {
        FullPool pool = new FullPool();
        SendsFixture f = new SendsFixture(new Stats(), Long.MAX_VALUE, pool);
        f.send(0, 0);
        f.fail();  // the record in flight failed
        pool.refusals.set(Integer.MAX_VALUE);
        assertThrows(KafkaException.class, () -> f.send(0, 1));
        assertEquals(0, f.sends.queued());
        assertEquals(1, f.records().size());
        f.close();
    }
}
