package io.mirrord.metrics;

import io.mirrord.sink.SendsFixture;
import io.mirrord.sink.WriterPlugin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
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
    void anExecutorStoppingClosesTheStreamsSendersThroughTheWritersPluginBeforeTheLastCountsShip() {
        Stats executor = new Stats();
        SendsFixture sends = new SendsFixture(executor);
        for (int i = 0; i < 3; i++) {
            sends.send(0, i);
            sends.ack();
        }
        sends.keepIdle();
        MirrordPlugin.Shipper shipper = new MirrordPlugin.Shipper(executor);
        List<Object> messages = new ArrayList<>();
        shipper.sendTo(messages::add);

        new WriterPlugin().executorPlugin().shutdown();  // spark.plugins lists it first: Spark stops it first
        shipper.shutdown();

        List<String> syncs = sends.syncs();  // the run's first sync, unless the close's batch left it out
        assertEquals("orders:0 2→2 run 0", syncs.get(syncs.size() - 1), "the delayed last one, showing the run");
        assertTrue(sends.producer.closed());
        assertEquals(1, messages.size());
        Stats totals = new Stats();
        totals.add((Stats.Delta) messages.get(0));
        assertTrue(totals.toJson().contains("\"src.orders\":{\"records\":3,"), totals.toJson());
    }
}
