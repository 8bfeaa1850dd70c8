package io.mirrord.sink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mirrord.metrics.Stats;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

/**
 * Under leader election a stream's bound follows what the target acknowledges in a sixth of the delivery timeout:
 * a target that slows down holds records in the source instead of expiring them in the producer (docs/decisions.md
 * §2).
 */
class QueueBoundFollowsTest {
    static final long MIB = 1L << 20;
    static final long SECOND = TimeUnit.SECONDS.toNanos(1);

    /** Feeds {@code n} timed acknowledgements of {@code ahead} bytes after {@code waitNanos}. */
    static void feed(QueueBound bound, int n, long ahead, long waitNanos) {
        for (int i = 0; i < n; i++) {
            bound.acknowledged(ahead, waitNanos);
        }
    }

    @Test
    void aTargetAcknowledgingSixMibASecondBringsTheBoundToHalfASecondOfIt() {
        QueueBound bound = QueueBound.following(12 * MIB, 3000);  // the default election's delivery timeout
        assertEquals(64 << 10, bound.get());  // from the floor up
        assertFalse(bound.followed());  // its start is not the target's rate: no journal line for it
        feed(bound, 200, 3 * MIB, SECOND / 2);  // 3 MiB acknowledged in the half second it waited: 6 MiB a second
        assertEquals(3 * MIB, bound.get(), MIB / 100);
        assertTrue(bound.followed());
    }

    @Test
    void aTargetFastAgainRaisesItBackToTheFixedBound() {
        QueueBound bound = QueueBound.following(12 * MIB, 3000);
        feed(bound, 200, 3 * MIB, SECOND / 2);
        feed(bound, 200, 3 * MIB, SECOND / 10);  // 30 MiB a second
        assertEquals(12 * MIB, bound.get());
        assertFalse(bound.followed());
    }

    @Test
    void aQuickTargetRaisesItFromTheFloorWithinAFewHundredRecordsAndASlowOneNeverBelowIt() {
        QueueBound bound = QueueBound.following(12 * MIB, 3000);
        feed(bound, 30, 64 << 10, SECOND / 200);  // 64 KiB acknowledged in 5 ms: 12.8 MiB a second
        assertTrue(bound.get() > 6 * MIB, String.valueOf(bound.get()));
        feed(bound, 500, 100, 3 * SECOND);  // a stalled target
        assertEquals(64 << 10, bound.get());
        QueueBound small = QueueBound.following(400, 3000);
        feed(small, 500, 1, SECOND);
        assertEquals(100, small.get());
    }

    @Test
    void oneSendInSixteenIsTimedAndAFixedBoundTimesNone() {
        QueueBound bound = QueueBound.following(12 * MIB, 3000);
        int timed = 0;
        for (int i = 0; i < 64; i++) {
            timed += bound.sample() ? 1 : 0;
        }
        assertEquals(4, timed);
        QueueBound fixed = QueueBound.fixed(12 * MIB);
        for (int i = 0; i < 64; i++) {
            assertFalse(fixed.sample());
        }
        fixed.acknowledged(1, SECOND);
        assertEquals(12 * MIB, fixed.get());
    }

    @Test
    void aStreamsSlowAcknowledgementsLowerItsBoundAndItsSendsWaitAtTheLowerOne() throws Exception {
        QueueBound bound = QueueBound.following(192, 30);  // a sixth of 30 ms: 5 ms; each record is 3 bytes
        SendsFixture f = new SendsFixture(new Stats(), bound);
        assertEquals(48, bound.get());  // a quarter of the fixed bound: the floor, here
        // acknowledged at once: far more than 192 bytes in 5 ms, but a sample that a pause of this thread (this JVM's
        // collector or compiler, another process on the cores) stretched past a few ms pulls the bound down: the
        // test asks how high it rose, well above the floor, not where the last rounds left it (under make test's
        // load, 79 after 60 rounds, once)
        long offset = 0;
        long highest = 0;
        for (int round = 0; round < 60; round++) {
            offset = rounds(f, offset, 1, 0);
            highest = Math.max(highest, bound.get());
        }
        assertTrue(highest > 96, String.valueOf(highest));
        rounds(f, offset, 30, 20);  // acknowledged 20 ms after the send: 48 bytes in 20 ms, 12 in 5 ms
        assertEquals(48, bound.get());
        for (int i = 0; i < 17; i++) {
            f.send(1, i);  // 51 bytes queued: past the followed bound
        }
        CompletableFuture<Void> next = CompletableFuture.runAsync(() -> f.send(1, 17));
        Thread.sleep(100);  // given time, it does not go out while 51 bytes await acknowledgement
        assertFalse(next.isDone());
        f.ack();
        next.get(5, TimeUnit.SECONDS);
        f.close();
    }

    @Test
    void recordsOfOnePartitionThatOvertakeAnothersBacklogDoNotRaiseTheBoundPastWhatTheTargetTakes() throws Exception {
        QueueBound bound = QueueBound.following(3000, 2400);  // a sixth of the delivery timeout: 400 ms
        Link link = new Link();
        double perSecond = link.carry(bound, 2, 400, 3 * SECOND);
        // the rate times the sixth, and a fifth for the sleeps' jitter: Little's law (the bytes ahead of a timed
        // record over its wait) gave a third more (the records of the partition whose turn came overtook the others)
        assertTrue(bound.get() < 1.2 * perSecond * 0.4, bound.get() + " bytes for " + perSecond + " a second");
    }

    @Test
    void noRecordWaitsHalfItsDeliveryTimeoutBehindAnotherPartitionsBacklog() throws Exception {
        QueueBound bound = QueueBound.following(12_000, 3000);  // the default election's; about 5,500 bytes a sixth
        Link link = new Link();
        link.carry(bound, 2, 2000, 4 * SECOND);
        // about twice the sixth, a third of the timeout (the other partition's records overtake the first's), and
        // half a sixth for this JVM's pauses and the sleeps' jitter; following a third, they waited up to 1.5 s
        assertTrue(link.longest < 3 * SECOND * 5 / 12, "a record waited " + link.longest / 1_000_000 + " ms");
    }

    /**
     * A target behind a link that acknowledges a batch of 16 records at a time, of each partition in turn, as the
     * producer drains them (one batch of each partition with records per request).
     */
    static final class Link extends MockProducer<byte[], byte[]> {
        private final Map<Integer, Deque<Sent>> queues = new TreeMap<>();
        private int turn;
        private long taken;  // bytes acknowledged
        long longest;

        Link() {
            super(SendsFixture.target(), false, null, new ByteArraySerializer(), new ByteArraySerializer());
        }

        @Override
        public synchronized Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> record, Callback callback) {
            if (!record.topic().equals(SendsFixture.TARGET)) {
                return super.send(record, callback);
            }
            queues.computeIfAbsent(record.partition(), p -> new ArrayDeque<>())
                    .add(new Sent(record, callback, System.nanoTime()));
            return new CompletableFuture<>();
        }

        /**
         * For {@code nanos}, a stream's sends under {@code bound} of {@code polls} records of {@code partitions}
         * partitions in turn (a fetch gives a partition's records at a time), a batch of 16 acknowledged every 4 ms;
         * the bytes acknowledged a second. {@link #longest}: a record's longest wait after the bound's first second.
         */
        double carry(QueueBound bound, int partitions, int polls, long nanos) throws Exception {
            SendsFixture f = new SendsFixture(new Stats(), bound, this);
            AtomicBoolean done = new AtomicBoolean();
            CompletableFuture<Void> source = CompletableFuture.runAsync(() -> {
                long offset = 0;
                for (int poll = 0; !done.get(); poll++) {
                    for (int i = 0; i < polls && !done.get(); i++) {
                        f.send(poll % partitions, offset++);
                    }
                }
            });
            long start = System.nanoTime();
            while (System.nanoTime() - start < nanos) {
                Thread.sleep(4);
                long waited = acknowledgeBatch();
                if (System.nanoTime() - start > SECOND) {
                    longest = Math.max(longest, waited);
                }
            }
            double perSecond = taken * (double) SECOND / (System.nanoTime() - start);
            done.set(true);
            while (!source.isDone()) {  // a send waiting for room ends with the next acknowledgements
                acknowledgeBatch();
                Thread.sleep(1);
            }
            source.get();
            f.close();
            return perSecond;
        }

        /** The next partition's first 16 records acknowledged; the longest time one of them waited (0: none). */
        synchronized long acknowledgeBatch() {
            List<Integer> waiting = queues.entrySet().stream().filter(e -> !e.getValue().isEmpty())
                    .map(Map.Entry::getKey).toList();
            if (waiting.isEmpty()) {
                return 0;
            }
            Deque<Sent> queue = queues.get(waiting.get(turn++ % waiting.size()));
            long longest = 1;
            for (int i = 0; i < 16 && !queue.isEmpty(); i++) {
                Sent sent = queue.poll();
                ProducerRecord<byte[], byte[]> r = sent.record();
                longest = Math.max(longest, System.nanoTime() - sent.atNanos());
                taken += r.key().length + r.value().length;
                sent.callback().onCompletion(new RecordMetadata(new TopicPartition(r.topic(), r.partition()), 0, 0,
                        r.timestamp(), r.key().length, r.value().length), null);
            }
            return longest;
        }

        private record Sent(ProducerRecord<byte[], byte[]> record, Callback callback, long atNanos) {
        }
    }

    /** {@code n} rounds of 16 sends to partition 0 from {@code offset}, acknowledged after {@code ms}; the next offset. */
    static long rounds(SendsFixture f, long offset, int n, long ms) throws InterruptedException {
        for (int round = 0; round < n; round++) {
            for (int i = 0; i < QueueBound.SAMPLE_EVERY; i++) {
                f.send(0, offset++);
            }
            Thread.sleep(ms);
            for (int i = 0; i < QueueBound.SAMPLE_EVERY; i++) {
                f.ack();
            }
        }
        return offset;
    }
}
