package io.mirrord.sink;

import io.mirrord.metrics.Stats;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.sources.ForeachWriterTable;
import org.apache.spark.sql.execution.streaming.sources.ForeachWriterTable$;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.Test;

/** What mirrord's writer reads: the plan's rows unconverted, the topic and header keys as their bytes. */
public class WriterInputTest {
    @Test
    void sparkHandsTheWriterThePlansRowsWithoutARowConversion() {
        MirrorWriter writer = MirrorWriter.atLeastOnce(Map.of(), 2, 12, true, "", 100, "");
        ForeachWriterTable<?> table = ForeachWriterTable$.MODULE$.apply(writer, (ExpressionEncoder<UnsafeRow>) null);
        assertTrue(table.converter().isRight(), "an encoder's Row conversion instead of the UnsafeRow itself");
    }

    @Test
    void aRowsTopicIsLookedUpByItsBytesAndATopicChangeIsSeen() {
        SourcePartitions partitions = new SourcePartitions("", new Stats(), null);
        byte[] bytes = "orders".getBytes(StandardCharsets.UTF_8);
        SourcePartition orders = partitions.of(UTF8String.fromBytes(bytes), 3);
        assertEquals("orders", orders.tp.topic());
        assertSame(orders, partitions.of(UTF8String.fromBytes(bytes.clone()), 3));
        SourcePartition other = partitions.of(UTF8String.fromString("orderz"), 3);
        assertEquals("orderz", other.tp.topic());
        assertNotSame(orders, other);
        assertSame(orders, partitions.of(UTF8String.fromString("orders"), 3));
    }

    @Test
    void aHeaderKeyIsKeptByACopyOfItsBytesNotTheRowsMemory() {
        HeaderKeys keys = new HeaderKeys();
        byte[] row = "trace-id".getBytes(StandardCharsets.UTF_8);
        assertEquals("trace-id", keys.of(UTF8String.fromBytes(row)));
        row[0] = 'b';  // Spark fills the same memory with the next row
        assertEquals(Set.of("trace-id"), keys.kept());
        assertEquals("brace-id", keys.of(UTF8String.fromBytes(row)));
        assertEquals("trace-id", keys.of(UTF8String.fromString("trace-id")));
    }

    @Test
    void theReadersRecordStandsForARowOnlyWhenTopicPartitionAndOffsetAreTheRows() {
        ConsumerRecord<byte[], byte[]> record = new ConsumerRecord<>("orders", 3, 41L, new byte[] {1}, new byte[] {2});
        assertTrue(MirrorWriter.isRowOf(record, new TopicPartition("orders", 3), 41));
        assertFalse(MirrorWriter.isRowOf(record, new TopicPartition("orders", 3), 42));
        assertFalse(MirrorWriter.isRowOf(record, new TopicPartition("orders", 2), 41));
        assertFalse(MirrorWriter.isRowOf(record, new TopicPartition("orderz", 3), 41));
        assertFalse(MirrorWriter.isRowOf(null, new TopicPartition("orders", 3), 41));
    }
}
