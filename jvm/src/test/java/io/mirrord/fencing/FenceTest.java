package io.mirrord.fencing;

import io.mirrord.metrics.Stats;
import io.mirrord.sink.SendsFixture;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The fence on an injected clock (docs/decisions.md §6): each test moves the monotonic and the wall clock by hand. */
class FenceTest {
    static final long LEASE = 3_000;
    static final long QUARANTINE = 2_400;

    /** Both clocks, moved by the test: {@code pause} moves both (a frozen process, a GC pause), {@code suspend} only
     * the wall clock (a suspended VM: the monotonic clock does not count it). */
    static final class FakeClock implements Fence.Clock {
        long nanos = 1_000_000_000L;
        long wall = 1_800_000_000_000L;

        @Override
        public long nanos() {
            return nanos;
        }

        @Override
        public long wallMillis() {
            return wall;
        }

        void pause(long ms) {
            nanos += TimeUnit.MILLISECONDS.toNanos(ms);
            wall += ms;
        }

        void suspend(long ms) {
            wall += ms;
        }
    }

    final FakeClock clock = new FakeClock();
    final AtomicInteger halts = new AtomicInteger();
    Fence fence;
    Fence before;

    @BeforeEach
    void fence() {
        fence = new Fence(clock, halts::incrementAndGet, false);
        fence.configure(QUARANTINE);
        before = Fence.jvm();
        Fence.install(fence);
    }

    @AfterEach
    void restore() {
        Fence.install(before);
    }

    /** The supervisor, every 250 ms for {@code ms}: pulses, no new grant (it cannot confirm the election). */
    void attended(long ms) {
        for (long t = 0; t < ms; t += 250) {
            clock.pause(250);
            fence.pulse();
        }
    }

    boolean granted() {
        return fence.grant(LEASE, clock.wall + LEASE);
    }

    @Test
    void withoutALeaseNothingIsRefusedAndALeaseHoldsForItsTimeByBothClocks() {
        assertTrue(fence.permits());  // leader election off, or never granted
        assertTrue(granted());
        attended(2_750);
        assertTrue(fence.permits());
        assertEquals(Fence.State.HELD, fence.observe());
        clock.pause(250);  // 3 s after the grant
        assertFalse(fence.permits());
        // a wall deadline earlier than the monotonic one ends the lease first
        Fence other = new Fence(clock, halts::incrementAndGet, false);
        assertTrue(other.grant(LEASE, clock.wall + 1_000));
        other.pulse();
        clock.pause(999);
        assertTrue(other.permits());
        clock.pause(1);
        assertFalse(other.permits());
    }

    @Test
    void aLeaseThatRunsOutWhileTheSupervisorAnswersRefusesRecordsWithoutHaltingAndIsGrantedAgainAfterItsQuarantine()
            throws Exception {
        SendsFixture sends = new SendsFixture(new Stats());
        assertTrue(granted());
        sends.send(0, 1);
        attended(3_000);  // the election is not confirmed any more: an outage, a partition
        assertEquals(Fence.State.LAPSED, fence.observe());
        assertThrows(FencedError.class, () -> sends.send(0, 2));
        sends.fail();  // the I/O thread fails what was buffered: no halt, the supervisor answers
        assertEquals(0, halts.get());
        // confirmed again, but what the old lease let through may still be delivered: not yet
        attended(2_000);
        assertFalse(granted());
        assertFalse(fence.permits());
        attended(500);
        assertTrue(granted());
        assertTrue(fence.permits());
        new SendsFixture(new Stats()).send(0, 3);  // the query's next sender (the failure ended the first one's)
        assertEquals(0, halts.get());
    }

    @Test
    void aLapseWhileTheSupervisorIsFrozenFencesTheJvm() {
        assertTrue(granted());
        clock.pause(1_000);  // the supervisor's last pulse, then it freezes: its JVM goes on
        fence.pulse();
        clock.pause(1_999);
        assertEquals(Fence.State.HELD, fence.observe());
        clock.pause(1);  // the watchdog's look when the lease runs out
        assertEquals(Fence.State.FENCED, fence.observe());
        assertEquals(1, halts.get());
        assertFalse(fence.permits());
        fence.observe();
        assertEquals(1, halts.get());  // halted once
    }

    @Test
    void aWholeHostFrozenPastItsLeaseIsFencedEvenIfItsSupervisorSpeaksFirstWhenItWakes() {
        assertTrue(granted());
        fence.pulse();
        clock.pause(60_000);  // SIGSTOP of every process, or a GC pause of this JVM: both clocks move
        assertEquals("FENCED", fence.pulse());  // judged by the pulses before the lapse
        assertEquals(1, halts.get());
        assertFalse(granted());  // a fenced host stays fenced: not granted, not released
        fence.release();
        assertFalse(fence.permits());
    }

    @Test
    void aSuspendedVmWhoseMonotonicClockStoodStillIsFencedByTheWallClock() {
        assertTrue(granted());
        fence.pulse();
        clock.suspend(30_000);
        assertFalse(fence.permits());  // checked at the send, before any watchdog could look
        assertEquals(Fence.State.FENCED, fence.observe());
        assertEquals(1, halts.get());
    }

    @Test
    void theProducersIoThreadFailingAnExpiredBatchHaltsAFencedJvmBeforeItsNextRequests() throws Exception {
        SendsFixture sends = new SendsFixture(new Stats());
        sends.send(0, 1);
        assertTrue(granted());
        fence.pulse();
        clock.pause(10_000);  // a pause past the lease and the delivery timeout: the batches expired meanwhile
        sends.fail();  // the first thing the I/O thread does after the pause, before sending
        assertEquals(1, halts.get());
    }

    @Test
    void aLapsedLeaseWhoseSupervisorStopsAnsweringFencesTheJvm() {
        assertTrue(granted());
        attended(3_000);
        assertEquals(Fence.State.LAPSED, fence.observe());
        clock.pause(Fence.ATTENDED_MS + 1);
        assertEquals(Fence.State.FENCED, fence.observe());
        assertEquals(1, halts.get());
    }

    @Test
    void aRevokedLeaseFencesAtOnceAndAReleasedOneRefusesNothing() throws Exception {
        assertTrue(granted());
        fence.release();
        fence.revoke();  // released: a clean stop, nothing to fence
        assertTrue(fence.permits());
        assertEquals(0, halts.get());
        assertTrue(granted());
        fence.revoke();  // another host holds the flow
        assertEquals(1, halts.get());
        assertFalse(fence.permits());
        assertThrows(FencedError.class, () -> new SendsFixture(new Stats()).send(0, 1));
    }

    @Test
    void aLeaseReleasedAfterItLapsedKeepsItsQuarantine() {
        assertTrue(granted());
        attended(3_000);
        fence.release();
        assertTrue(fence.permits());  // no query, nothing to refuse
        assertFalse(granted());
        attended(QUARANTINE);
        assertTrue(granted());
    }
}
