package io.mirrord.sink;

import io.mirrord.metrics.Stats;
import io.mirrord.positions.Incarnations;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.NotEnoughReplicasException;
import org.apache.kafka.common.errors.TransactionAbortableException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

public class StreamTransactionsTest {
    static final String POSITIONS = "mirrord-positions.source.internal";
    static final String SYNCS = "mm2-offset-syncs.source.internal";
    static final TopicPartition ORDERS = new TopicPartition("orders", 2);

    final AtomicLong clock = new AtomicLong(1_000);
    final Stats stats = new Stats();

    StreamTransactions transactions(MockProducer<byte[], byte[]> producer) {
        return new StreamTransactions(producer, "mirrord-default-source-0", POSITIONS, SYNCS, 100, 100, stats, "",
                clock::get, CommittedPositions::none);
    }

    static MockProducer<byte[], byte[]> producer(boolean autoComplete) {
        return new MockProducer<>(autoComplete, new ByteArraySerializer(), new ByteArraySerializer());
    }

    static void send(StreamTransactions t, long offset) {
        t.send(t.partitions().of(ORDERS.topic(), ORDERS.partition()), offset, 1_700_000_000_000L + offset,
                bytes("k" + offset), bytes("v" + offset),
                new RecordHeaders().add("h", bytes("x")));
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static List<String> topics(List<ProducerRecord<byte[], byte[]>> records) {
        List<String> topics = new ArrayList<>();
        records.forEach(r -> topics.add(r.topic()));
        return topics;
    }

    @Test
    void recordsTheirPositionAndTheirSyncsCommitInOneTransaction() {
        MockProducer<byte[], byte[]> producer = producer(true);
        StreamTransactions t = transactions(producer);
        assertTrue(producer.transactionInitialized());
        send(t, 40);
        send(t, 41);
        assertTrue(producer.history().isEmpty(), "nothing is visible before the commit");
        t.commit();
        assertTrue(producer.transactionCommitted());
        List<ProducerRecord<byte[], byte[]>> written = producer.history();
        assertEquals(List.of("orders", "orders", SYNCS, POSITIONS), topics(written));
        assertEquals(List.of(41L), syncedUpstreams(written), "the run's last record (its sync shows the run from 40)");
        assertEquals(40L, ByteBuffer.wrap(written.get(2).headers().lastHeader(OffsetSyncWriter.RUN_START_HEADER)
                .value()).getLong());
        ProducerRecord<byte[], byte[]> first = written.get(0);
        assertEquals(2, first.partition());
        assertEquals(1_700_000_000_040L, first.timestamp());
        assertEquals("k40", new String(first.key(), StandardCharsets.UTF_8));
        assertEquals("x", new String(first.headers().lastHeader("h").value(), StandardCharsets.UTF_8));
        ProducerRecord<byte[], byte[]> position = written.get(3);
        assertEquals("orders:2", new String(position.key(), StandardCharsets.UTF_8));
        assertEquals("{\"offset\":42}", new String(position.value(), StandardCharsets.UTF_8));  // no id known yet
        assertEquals(1, t.committed());
        assertTrue(stats.toJson().contains("\"transactions\":{\"committed\":1,\"aborted\":0}"), stats.toJson());
    }

    @Test
    void aPositionNamesTheSourceTopicsIdItWasReadUnder() {
        MockProducer<byte[], byte[]> producer = producer(true);
        StreamTransactions t = transactions(producer);
        Incarnations.setTopicId("orders", "old-id");
        send(t, 5);
        Incarnations.setTopicId("orders", "new-id");  // recreated: the next batch's records are the new topic's
        send(t, 0);
        t.commit();
        ProducerRecord<byte[], byte[]> position = producer.history().get(producer.history().size() - 1);
        assertEquals(POSITIONS, position.topic());
        assertEquals("{\"offset\":1,\"topicId\":\"new-id\"}", new String(position.value(), StandardCharsets.UTF_8));
        Incarnations.setTopicId("orders", null);
    }

    @Test
    void aCommitThatFailedFailsTheTransactionAndEverySendAfterIt() {
        MockProducer<byte[], byte[]> producer = producer(true);
        StreamTransactions t = transactions(producer);
        send(t, 3);
        producer.commitTransactionException = new TransactionAbortableException("the coordinator aborted it");
        RuntimeException e = assertThrows(TransactionFailed.class, t::commit);
        assertTrue(e.getMessage().contains("not committed") && e.getMessage().contains("aborted it"), e.getMessage());
        // the task's next record, between the timer's failed commit and the task's end: the transaction's failure,
        // not the producer's IllegalStateException, so the supervisor restarts from the target's positions
        assertThrows(TransactionFailed.class, () -> send(t, 4));
        assertEquals(0, t.committed());
    }

    @Test
    void aTransactionCommitsOnceItIsTheIntervalOld() {
        MockProducer<byte[], byte[]> producer = producer(true);
        StreamTransactions t = transactions(producer);
        send(t, 0);
        clock.addAndGet(99);
        t.commitIfDue();
        assertFalse(producer.transactionCommitted());
        assertTrue(t.isOpen());
        clock.addAndGet(1);
        t.commitIfDue();
        assertTrue(producer.transactionCommitted());
        assertFalse(t.isOpen());
        t.commitIfDue();  // nothing open: nothing to commit
        assertEquals(1, t.committed());
    }

    final AtomicLong polls = new AtomicLong();
    final AtomicLong dryPolls = new AtomicLong();

    /**
     * Sends a record every {@code stepMs} for {@code forMs}, each after a poll of the reader ({@code dry}: one that
     * found the source dry); the clock's value at the start of each commit.
     */
    List<Long> sendEvery(StreamTransactions t, long stepMs, long forMs, boolean dry) {
        List<Long> commits = new ArrayList<>();
        long end = clock.get() + forMs;
        for (long offset = 0; clock.get() < end; offset++) {
            long before = t.committed();
            long at = clock.get();
            polls.incrementAndGet();
            dryPolls.addAndGet(dry ? 1 : 0);
            send(t, offset);
            if (t.committed() > before) {
                commits.add(at);
            }
            clock.addAndGet(stepMs);
        }
        return commits;
    }

    @Test
    void aBacklogsTransactionsLastThirtyTimesTheirLastCommitUpToTenIntervalsAndAStreamThatKeepsUpCommitsAtTheInterval() {
        long[] commitTakes = {10};
        StreamTransactions t = transactions(slowCommits(commitTakes));
        t.pace.reading(polls::get, dryPolls::get);
        // a backlog: a record every millisecond, every poll full. The first commit is due at the interval and takes
        // 10 ms; each next transaction is due at 300 ms (begun at the send after the commit)
        List<Long> backlog = sendEvery(t, 1, 1_000, false);
        assertEquals(List.of(1_100L, 1_411L, 1_722L), backlog.subList(0, 3), backlog.toString());
        // a backlog whose thread is descheduled 20 ms now and then: its polls still come back full, still a backlog
        // (counted by the task's pauses of 5 ms or more, such a backfill kept up in nearly every transaction)
        List<Long> hiccups = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            hiccups.addAll(sendEvery(t, 1, 80, false));
            clock.addAndGet(20);
        }
        assertTrue(hiccups.size() >= 2 && hiccups.get(1) - hiccups.get(0) >= 300, hiccups.toString());
        // a target that stalls: each commit takes 5 s, and the next transaction lasts ten intervals, not fifty
        commitTakes[0] = 5_000;
        List<Long> stalled = sendEvery(t, 1, 30_000, false);
        assertEquals(5_000 + 1 + 1_000, stalled.get(1) - stalled.get(0), stalled.toString());
        // the stream keeps up: its polls come back short (a record every 10 ms, or every millisecond: the source had
        // no more ready), and its transactions are due at the interval whatever the last commit took
        commitTakes[0] = 40;
        for (long step : new long[] {10, 1}) {
            List<Long> keepsUp = sendEvery(t, step, 2_000, true);
            assertTrue(keepsUp.size() >= 10, keepsUp.toString());
            for (int i = 2; i < keepsUp.size(); i++) {
                assertTrue(keepsUp.get(i) - keepsUp.get(i - 1) <= 150, keepsUp.toString());
            }
        }
    }

    @Test
    void aTaskInterruptedByTheQuerysStopClosesItsProducerAtOnceAndOneThatEndedWaitsForIt() {
        List<String> closes = new ArrayList<>();
        StreamTransactions stopped = transactions(closing(closes));
        send(stopped, 1);
        Thread.currentThread().interrupt();  // what a query's stop does to its tasks
        try {
            assertFalse(stopped.taskFailed());
        } finally {
            assertTrue(Thread.interrupted(), "the task's interrupt is left as it was");
        }
        StreamTransactions ended = transactions(closing(closes));
        send(ended, 1);
        ended.taskEnded();
        ended.close();  // a sender the JVM kept, closed when its stream's next task needs another
        // the interrupted task's close does not wait, nor is it interrupted while its producer's thread stops
        assertEquals(List.of(Duration.ZERO + " uninterrupted", StreamSends.CLOSE_TIMEOUT + " uninterrupted"), closes);
    }

    /** A producer that completes every send and records each close in {@code closes} ({@link SendsFixture#closing}). */
    static MockProducer<byte[], byte[]> closing(List<String> closes) {
        return SendsFixture.closing(closes, Cluster.empty(), true);
    }

    /** A producer whose commits take {@code commitTakes[0]} ms on the test's clock (the drain and the coordinator's answer). */
    MockProducer<byte[], byte[]> slowCommits(long[] commitTakes) {
        return new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer()) {
            @Override
            public void commitTransaction() {
                clock.addAndGet(commitTakes[0]);
                super.commitTransaction();
            }
        };
    }

    @Test
    void eachCommittedTransactionsLengthAndItsCommitsTimeAreCounted() {
        StreamTransactions t = transactions(slowCommits(new long[] {30}));
        send(t, 1);
        clock.addAndGet(70);
        send(t, 2);
        t.commit();  // begun at the first send, 70 ms of records and a commit of 30 ms: 100 ms
        send(t, 3);
        clock.addAndGet(900);
        t.commit();  // 930 ms
        String json = stats.toJson();
        assertTrue(json.contains(",\"transaction_seconds\":{\"bounds\":[0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5,5,10,30,"
                + "60,300,3600],\"counts\":[0,0,0,0,1,0,0,1,0,0,0,0,0,0,0,0],\"sum\":1.030},"), json);
        assertTrue(json.contains(",\"commit_seconds\":{\"bounds\":[0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5,5,10,30,"
                + "60,300,3600],\"counts\":[0,0,0,2,0,0,0,0,0,0,0,0,0,0,0,0],\"sum\":0.060},"), json);
    }

    @Test
    void aTransactionShowsItsRunsLastRecordsAndAnAbortedOneLeavesThemShown() {
        // a backlog copied in transactions whose partitions then went quiet: the last sync of each run is in its
        // own transaction, so neither a next record that never comes nor an aborted transaction (whose syncs are
        // never read) can keep translation of a group in that run from being exact
        MockProducer<byte[], byte[]> producer = producer(true);
        StreamTransactions t = transactions(producer);
        for (long offset = 0; offset < 5; offset++) {
            send(t, offset);
        }
        t.commit();
        assertEquals(List.of(4L), syncedUpstreams(producer.history()), "the run's last record, which shows the run");
        send(t, 5);
        t.abort();
        assertEquals(List.of(4L), syncedUpstreams(producer.history()));
        assertEquals(1, t.committed());
    }

    static List<Long> syncedUpstreams(List<ProducerRecord<byte[], byte[]>> records) {
        List<Long> upstreams = new ArrayList<>();
        records.stream().filter(r -> r.topic().equals(SYNCS))
                .forEach(r -> upstreams.add(ByteBuffer.wrap(r.value()).getLong()));
        return upstreams;
    }

    @Test
    void aFailedRecordFailsTheCommitAndTheAbortLeavesNothingVisible() {
        MockProducer<byte[], byte[]> producer = producer(false);
        StreamTransactions t = transactions(producer);
        send(t, 7);
        send(t, 8);
        producer.completeNext();
        producer.errorNext(new NotEnoughReplicasException("not enough replicas"));
        RuntimeException e = assertThrows(TransactionFailed.class, t::commit);
        assertTrue(e.getMessage().contains("not enough replicas"), e.getMessage());
        assertThrows(TransactionFailed.class, () -> send(t, 9), "no send after a failure");
        t.abort();
        assertTrue(producer.transactionAborted());
        assertTrue(producer.history().isEmpty());
        assertEquals(0, t.committed());
        assertTrue(stats.toJson().contains("\"transactions\":{\"committed\":0,\"aborted\":1}"), stats.toJson());
    }

    @Test
    void aProducerFencedByANewerOwnerSaysSo() {
        MockProducer<byte[], byte[]> producer = producer(true);
        StreamTransactions t = transactions(producer);
        send(t, 1);
        t.commit();
        producer.fenceProducer();
        RuntimeException e = assertThrows(TransactionFailed.class, () -> send(t, 2));
        assertTrue(e.getMessage().contains("mirrord-default-source-0 was fenced"), e.getMessage());
        assertEquals(1, producer.history().stream().filter(r -> r.topic().equals("orders")).count());
    }
}
