package io.mirrord.fencing;

import io.mirrord.sink.MirrorInterceptorTest;
import io.mirrord.metrics.Stats;
import io.mirrord.sink.MirrorInterceptor;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class FenceTest {
    @AfterEach
    void disarm() {
        Fence.reset();
    }

    @Test
    void aLapsedLeaseRefusesEveryRecordAndFencesTheJvmWhileAReleasedOneRefusesNothing() throws Exception {
        CountDownLatch fenced = new CountDownLatch(1);
        Fence.onLapse(fenced::countDown);
        MirrorInterceptor interceptor = new MirrorInterceptor(
                config -> new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer()), new Stats(),
                false);
        interceptor.configure(Map.of());

        assertTrue(Fence.open());  // never renewed: leader election off
        MirrorInterceptorTest.sent(interceptor, 0, 1);
        Fence.renew(60_000);
        MirrorInterceptorTest.sent(interceptor, 0, 2);
        assertFalse(fenced.await(200, TimeUnit.MILLISECONDS));

        Fence.revoke();
        assertFalse(Fence.open());
        assertThrows(FencedError.class, () -> MirrorInterceptorTest.sent(interceptor, 0, 3));
        assertTrue(fenced.await(5, TimeUnit.SECONDS));
        // a supervisor woken after its lease lapsed cannot renew it, nor release it: it stays fenced
        assertFalse(Fence.renew(60_000));
        Fence.release();
        assertFalse(Fence.open());
        assertThrows(FencedError.class, () -> MirrorInterceptorTest.sent(interceptor, 0, 4));

        Fence.reset();
        assertTrue(Fence.renew(60_000));
        Fence.release();
        Fence.revoke();
        assertTrue(Fence.open());  // released: a clean stop
        MirrorInterceptorTest.sent(interceptor, 0, 5);
    }
}
