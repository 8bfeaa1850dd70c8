package io.mirrord.metrics;

import io.mirrord.sink.OffsetSyncWriterTest;
import io.mirrord.sink.MirrorInterceptorTest;
import io.mirrord.sink.MirrorInterceptor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

class MirrordPluginTest {
    @Test
    void driverAddsWhatExecutorsShipAndExecutorsKeepNothingTwice() throws Exception {
        Stats executor = new Stats();
        Stats totals = new Stats();
        MirrordPlugin.Collector driver = new MirrordPlugin.Collector(totals);
        MirrordPlugin.Shipper shipper = new MirrordPlugin.Shipper(executor);
        List<Object> messages = new ArrayList<>();
        shipper.sendTo(message -> {
            messages.add(message);
            driver.receive(message);
        });

        executor.addRecord("t");
        shipper.ship();
        shipper.ship();  // nothing new: nothing sent
        executor.addRecord("t");
        shipper.ship();

        assertEquals(2, messages.size());
        assertTrue(totals.toJson().contains("\"t\":{\"records\":2,"), totals.toJson());
        assertTrue(executor.toJson().contains("\"t\":{\"records\":0,"), executor.toJson());
    }

    @Test
    void countsThatCannotBeSentAreKeptForTheNextTime() {
        Stats executor = new Stats();
        MirrordPlugin.Shipper shipper = new MirrordPlugin.Shipper(executor);
        shipper.sendTo(message -> {
            throw new IOException("driver gone");
        });
        executor.addRecord("t");
        shipper.ship();
        assertTrue(executor.toJson().contains("\"t\":{\"records\":1,"), executor.toJson());
    }

    @Test
    void driverRejectsOtherMessages() {
        assertThrows(IllegalArgumentException.class, () -> new MirrordPlugin.Collector(new Stats()).receive("hello"));
    }

    @Test
    void anExecutorStoppingWritesTheDelayedSyncsBeforeItShipsTheLastCounts() {
        Stats executor = new Stats();
        MockProducer<byte[], byte[]> syncs = new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());
        MirrorInterceptor interceptor = new MirrorInterceptor(config -> syncs, executor, true);
        interceptor.configure(Map.of("bootstrap.servers", "target:9092",
                MirrorInterceptor.SYNCS_TOPIC, OffsetSyncWriterTest.SYNCS, MirrorInterceptor.SYNCS_FLUSH_MS, "60000"));
        try {
            for (int i = 0; i < 3; i++) {
                MirrorInterceptorTest.sent(interceptor, 0, i);
                MirrorInterceptorTest.acked(interceptor, 0, i);
            }
            MirrordPlugin.Shipper shipper = new MirrordPlugin.Shipper(executor);
            List<Object> messages = new ArrayList<>();
            shipper.sendTo(messages::add);

            shipper.shutdown();

            assertEquals(2, syncs.history().size());
            assertEquals(1, messages.size());
            Stats totals = new Stats();
            totals.add((Stats.Delta) messages.get(0));
            assertTrue(totals.toJson().contains("\"syncs\":2,\"sync_errors\":0,"), totals.toJson());
        } finally {
            interceptor.close();
        }
    }
}
