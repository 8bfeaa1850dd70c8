package io.mirrord.sink;

import io.mirrord.metrics.Stats;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A stream's sender at least once ({@link StreamSends}) on a {@link MockProducer} that completes nothing by itself,
 * source topic {@value #SOURCE} into {@value #TARGET}, offset syncs into {@link OffsetSyncWriterTest#SYNCS}
 * written by the test: for the tests of other packages.
 */
public final class SendsFixture {
    public static final String SOURCE = "orders";
    public static final String TARGET = "src.orders";
    public final MockProducer<byte[], byte[]> producer;
    final StreamSends sends;

    public SendsFixture(Stats stats) {
        this(stats, Long.MAX_VALUE);
    }

    /** {@code queueBound}: the bytes awaiting acknowledgement past which a send waits (each record is 3 bytes). */
    SendsFixture(Stats stats, long queueBound) {
        this(stats, queueBound, new MockProducer<>(target(), false, null, new ByteArraySerializer(),
                new ByteArraySerializer()));
    }

    /** On {@code producer}, a {@link MockProducer} of {@link #target()} that completes nothing by itself. */
    SendsFixture(Stats stats, long queueBound, MockProducer<byte[], byte[]> producer) {
        this(stats, QueueBound.fixed(queueBound), producer);
    }

    /** With {@code bound}. */
    SendsFixture(Stats stats, QueueBound bound) {
        this(stats, bound, new MockProducer<>(target(), false, null, new ByteArraySerializer(),
                new ByteArraySerializer()));
    }

    /** With {@code bound}, on {@code producer}. */
    SendsFixture(Stats stats, QueueBound bound, MockProducer<byte[], byte[]> producer) {
        this.producer = producer;
        sends = new StreamSends("at-least-once-0", producer, OffsetSyncWriterTest.SYNCS, 100, 1000, stats, "src.",
                false, bound);
    }

    /**
     * A producer of {@code cluster} that records each close's timeout in {@code closes}, and whether its thread was
     * interrupted then.
     */
    static MockProducer<byte[], byte[]> closing(List<String> closes, Cluster cluster, boolean autoComplete) {
        return new MockProducer<>(cluster, autoComplete, null, new ByteArraySerializer(), new ByteArraySerializer()) {
            @Override
            public void close(Duration timeout) {
                closes.add(timeout + (Thread.currentThread().isInterrupted() ? " interrupted" : " uninterrupted"));
                super.close(timeout);
            }
        };
    }

    /** A target cluster of one broker with {@value #TARGET}'s partitions 0 to 7: offsets count per partition. */
    static Cluster target() {
        Node broker = new Node(0, "target", 9092);
        List<PartitionInfo> partitions = new ArrayList<>();
        for (int p = 0; p < 8; p++) {
            partitions.add(new PartitionInfo(TARGET, p, broker, new Node[] {broker}, new Node[] {broker}));
        }
        return new Cluster("target", List.of(broker), partitions, Set.of(), Set.of());
    }

    /** The record at {@code offset} of {@value #SOURCE}'s {@code partition}, sent. */
    public void send(int partition, long offset) {
        sends.send(sends.partitions().of(SOURCE, partition), offset, 1_000L + offset, new byte[] {1},
                new byte[] {2, 3}, null);
    }

    /** The oldest record in flight acknowledged. */
    public void ack() {
        producer.completeNext();
    }

    /** The oldest record in flight failed, as the producer's I/O thread fails an expired batch. */
    public void fail() {
        producer.errorNext(new TimeoutException("expired"));
    }

    /** Kept by the JVM as an idle stream's sender, as after its task's end. */
    public void keepIdle() {
        StreamSenders.done(sends, true, "test", 0);
    }

    /** The offset syncs written, as {@link OffsetSyncWriterTest#describe} says them. */
    public List<String> syncs() {
        return producer.history().stream().filter(r -> r.topic().equals(OffsetSyncWriterTest.SYNCS))
                .map(OffsetSyncWriterTest::describe).toList();
    }

    /** The records written into the target topic. */
    public List<ProducerRecord<byte[], byte[]>> records() {
        return producer.history().stream().filter(r -> r.topic().equals(TARGET)).toList();
    }

    public void close() {
        sends.close();
    }
}
