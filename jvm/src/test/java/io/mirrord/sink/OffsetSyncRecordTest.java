package io.mirrord.sink;

import static io.mirrord.sink.OffsetSyncWriterTest.ORDERS;
import static io.mirrord.sink.OffsetSyncWriterTest.SYNCS;
import static io.mirrord.sink.OffsetSyncWriterTest.written;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.mirrord.metrics.Stats;
import java.util.HexFormat;
import java.util.List;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

/** An offset sync's record: MirrorMaker 2's key and value, then mirrord's writer id and runs (docs/decisions.md §7). */
public class OffsetSyncRecordTest {
    final MockProducer<byte[], byte[]> producer = new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());
    final Stats stats = new Stats();

    OffsetSyncWriter writer(long offsetLagMax) {
        return new OffsetSyncWriter(producer, SYNCS, offsetLagMax, 1000, stats, false);
    }

    @Test
    void recordIsMirrorMaker2sOffsetSyncWithTheRunStartHeader() {
        ProducerRecord<byte[], byte[]> record =
                new OffsetSync(ORDERS, 0x0102L, 0x0304L, 0x0a0bL).toRecord(SYNCS, 0x0c0dL);
        HexFormat hex = HexFormat.of();
        // STRING "orders" (INT16 length 6 + UTF-8), INT32 3: MirrorMaker 2's key; INT64 the writer's id
        assertEquals("0006" + "6f7264657273" + "00000003" + "0000000000000c0d", hex.formatHex(record.key()));
        // INT64 upstream, INT64 downstream
        assertEquals("0000000000000102" + "0000000000000304", hex.formatHex(record.value()));
        Header[] headers = record.headers().toArray();
        assertEquals(1, headers.length);
        assertEquals("mirrord.run.start", headers[0].key());
        assertEquals("0000000000000a0b", hex.formatHex(headers[0].value()));
        assertEquals(0, record.partition());
        assertEquals(null, record.timestamp());
    }

    @Test
    void eachSyncCarriesTheWritersEarlierRunsAndTheTwoLowestMergeBeyondEight() {
        OffsetSyncWriter writer = writer(100);
        for (int run = 0; run < 10; run++) {  // ten runs of two records, each rewinding by one
            writer.acked(ORDERS, 10L * run, 3L * run);
            writer.acked(ORDERS, 10L * run + 1, 3L * run + 1);
            writer.reset(writer.state(ORDERS));
        }
        writer.acked(ORDERS, 500, 100);
        List<String> syncs = written(writer, producer);
        // ten runs, eight kept: runs 0, 1 and 2 (first records at 0, 3 and 6) merged into one record at 21, at 0;
        // the later ones as they were
        assertEquals("orders:3 500→100 run 500 after 21→0 run 21, 31→10 run 30, 41→13 run 40, 51→16 run 50, "
                + "61→19 run 60, 71→22 run 70, 81→25 run 80, 91→28 run 90", syncs.get(syncs.size() - 1));
        // the first run's syncs carry nothing: a writer that never rewinds writes MirrorMaker 2's record as before
        assertEquals(1, producer.history().get(0).headers().toArray().length);
    }

    @Test
    void everyWriterHasAKeyOfItsOwnAfterMirrorMaker2sKey() {
        MockProducer<byte[], byte[]> other = new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());
        OffsetSyncWriter first = writer(100);
        OffsetSyncWriter second = new OffsetSyncWriter(other, SYNCS, 100, 1000, stats, false);
        first.acked(ORDERS, 0, 0);
        second.acked(ORDERS, 0, 1);
        first.sendQueued();
        second.sendQueued();
        byte[] a = producer.history().get(0).key();
        byte[] b = other.history().get(0).key();
        byte[] mm2 = new OffsetSync(ORDERS, 0, 0, 0).key();
        assertArrayEquals(mm2, java.util.Arrays.copyOf(a, mm2.length));
        assertArrayEquals(mm2, java.util.Arrays.copyOf(b, mm2.length));
        assertFalse(java.util.Arrays.equals(a, b));
    }

    @Test
    void nonAsciiTopicLengthIsInBytes() {
        byte[] key = new OffsetSync(new TopicPartition("é", 0), 0, 0, 0).key();
        assertEquals("0002c3a900000000", HexFormat.of().formatHex(key));
    }
}
