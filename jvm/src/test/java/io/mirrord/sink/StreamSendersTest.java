package io.mirrord.sink;

import io.mirrord.fencing.FencedError;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.header.Headers;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

public class StreamSendersTest {
    /** A sender whose first timed commit finds the lease lapsed. */
    static final class Ticked implements StreamSender {
        final AtomicInteger ticks = new AtomicInteger();

        @Override
        public String id() {
            return "mirrord-test-ticked";
        }

        @Override
        public SourcePartitions partitions() {
            throw new UnsupportedOperationException();
        }

        @Override
        public void send(SourcePartition source, long offset, Long timestampMs, byte[] key, byte[] value,
                         Headers headers) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void taskEnded() {
        }

        @Override
        public boolean taskFailed() {
            return false;
        }

        @Override
        public long inFlight() {
            return 0;
        }

        @Override
        public void tick() {
            if (ticks.incrementAndGet() == 1) {
                throw new FencedError("transaction of mirrord-test-ticked not committed: this host's lease lapsed");
            }
        }

        @Override
        public void close() {
        }
    }

    @Test
    @Timeout(10)
    void theTimerGoesOnAfterACommitFoundTheLeaseLapsed() throws InterruptedException {
        // a timer task that throws is never run again: every stream's timed commits would have stopped for the
        // JVM's life (a lapse in a query whose next start would then commit only when its task sends)
        Ticked sender = new Ticked();
        StreamSenders.claim(sender.id(), idle -> false, () -> sender);
        try {
            StreamSenders.tickEvery(20);
            while (sender.ticks.get() < 3) {
                TimeUnit.MILLISECONDS.sleep(10);
            }
            assertTrue(sender.ticks.get() >= 3);
        } finally {
            StreamSenders.done(sender, false, "test", 0);
        }
    }
}
