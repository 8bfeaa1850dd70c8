package io.mirrord.fencing;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * This host's lease on the flow, held in the JVM that sends the records (docs/decisions.md §6). mirrord's
 * supervisor grants it ({@link #grant}) for what is left of half the election's session after the start of
 * its last confirmed membership, and pulses ({@link #pulse}) every 250 ms to say it still answers. Records
 * are sent only while the lease holds by both clocks, monotonic ({@link Clock#nanos}) and wall
 * ({@link Clock#wallMillis}: a suspended VM's monotonic clock does not count the suspension, its wall clock
 * does once corrected): mirrord's writer refuses every other one.
 *
 * <p>States: {@link State#OFF} (no lease: leader election off, or released for a clean stop; nothing is
 * refused), {@link State#HELD}, {@link State#LAPSED} (the lease ran out while the supervisor answered: it
 * could not confirm the election, an outage or a partition; records are refused, the JVM goes on, and a new
 * lease is granted once the records of the old one can no longer be delivered: {@link #configure}'s
 * quarantine after the lapse) and {@link State#FENCED} (the lease ran out while the supervisor did not
 * answer: a frozen supervisor, a GC pause or a suspended VM longer than a second around the lapse; or the
 * supervisor revoked it, another host holding the flow). FENCED halts the JVM with status 75 at once, from
 * whichever thread sees it first: a task's send, the producer's I/O thread failing an expired
 * batch ({@link #guard}, before that turn's requests go out), or the watchdog thread, every
 * {@value #CHECK_MS} ms. A lapse is judged with the pulses received before it: a thawed supervisor's first
 * call cannot excuse it.
 */
public final class Fence {
    public enum State { OFF, HELD, LAPSED, FENCED }

    /** The clocks a lease is checked against; injectable for tests. */
    public interface Clock {
        long nanos();

        long wallMillis();

        Clock SYSTEM = new Clock() {
            @Override
            public long nanos() {
                return System.nanoTime();
            }

            @Override
            public long wallMillis() {
                return System.currentTimeMillis();
            }
        };
    }

    public static final long CHECK_MS = 50;
    /** The supervisor pulses every 250 ms: none for this long, and it does not answer. */
    public static final long ATTENDED_MS = 1_000;
    private static final long ATTENDED_NANOS = TimeUnit.MILLISECONDS.toNanos(ATTENDED_MS);
    private static final Logger log = LoggerFactory.getLogger(Fence.class);
    private static volatile Fence jvm = new Fence(Clock.SYSTEM, () -> Runtime.getRuntime().halt(75), true);

    private final Clock clock;
    private final Runnable onFenced;
    private final boolean watched;
    private volatile State state = State.OFF;
    private volatile long untilNanos;
    private volatile long untilWallMs;
    private long pulseNanos;  // the supervisor's last pulse; guarded by this, like the rest
    private long pulseWallMs;
    private boolean pulsed;
    private long quarantineMs;
    private boolean quarantined;  // a lease lapsed: the next one not before freeNanos and freeWallMs
    private long freeNanos;
    private long freeWallMs;
    private boolean actedOn;
    private Thread watchdog;

    /** For tests: {@code onFenced} instead of halting, and no watchdog thread unless {@code watched}. */
    Fence(Clock clock, Runnable onFenced, boolean watched) {
        this.clock = clock;
        this.onFenced = onFenced;
        this.watched = watched;
    }

    /** This JVM's fence: py4j's {@code io.mirrord.fencing.Fence.jvm()}. */
    public static Fence jvm() {
        return jvm;
    }

    /** For tests: another fence as this JVM's. */
    static void install(Fence fence) {
        jvm = fence;
    }

    /** Whether this JVM may send a record now (the writer, per record; the group committer). */
    public static boolean open() {
        return jvm.permits();
    }

    /** The producer's I/O thread, when it fails a record: halts here if this host is fenced. */
    public static void guard() {
        Fence fence = jvm;
        if (fence.state != State.OFF) {
            fence.observe();
        }
    }

    /** After a lapse, no new lease for {@code quarantineMs}: the old lease's records fail first. */
    public synchronized void configure(long quarantineMs) {
        this.quarantineMs = quarantineMs;
    }

    /** Records may be sent: no lease is in force (OFF), or the one held has not run out by either clock. */
    public boolean permits() {
        State s = state;
        if (s == State.OFF) {
            return true;
        }
        if (s == State.HELD && clock.nanos() - untilNanos < 0 && clock.wallMillis() - untilWallMs < 0) {
            return true;
        }
        return observe() == State.OFF;
    }

    /**
     * The lease holds for {@code validForMs} more by the monotonic clock and until {@code wallDeadlineMs} by the
     * wall clock, whichever ends first; false, changing nothing, when this host is fenced or a lapsed lease's
     * quarantine is not over. A grant is a pulse too.
     */
    public synchronized boolean grant(long validForMs, long wallDeadlineMs) {
        State s = observe();
        notePulse();
        if (s == State.FENCED || validForMs <= 0) {
            return false;
        }
        long nanos = clock.nanos();
        long wall = clock.wallMillis();
        if (quarantined && (nanos - freeNanos < 0 || wall - freeWallMs < 0)) {
            return false;
        }
        quarantined = false;
        untilNanos = nanos + TimeUnit.MILLISECONDS.toNanos(validForMs);
        untilWallMs = Math.min(wallDeadlineMs, wall + validForMs);
        state = State.HELD;
        if (watched && watchdog == null) {
            watchdog = new Thread(this::watch, "mirrord-fence");
            watchdog.setDaemon(true);
            watchdog.start();
        }
        return true;
    }

    /** The supervisor answers; the state, after judging a lapse with the pulses before this one. */
    public synchronized String pulse() {
        State s = observe();
        notePulse();
        return s.name();
    }

    /** The supervisor stopped mirroring on purpose: no lease, nothing refused. A fenced host stays fenced. */
    public synchronized void release() {
        State s = observe();
        if (s == State.HELD || s == State.LAPSED) {
            state = State.OFF;
        }
    }

    /** Another host holds the flow: fenced now, whatever the lease's time (the JVM halts). Off: nothing to do. */
    public synchronized void revoke() {
        State s = observe();
        if (s == State.HELD || s == State.LAPSED) {
            fence("mirrord's lease was revoked: another host holds the flow, or this one is leaving it");
            observe();
        }
    }

    public synchronized String state() {
        return observe().name();
    }

    /** Judges the lease now: HELD becomes LAPSED or FENCED once it ran out, LAPSED becomes FENCED once the
     * supervisor stopped answering; a FENCED host halts. */
    public synchronized State observe() {
        long nanos = clock.nanos();
        long wall = clock.wallMillis();
        if (state == State.HELD && !(nanos - untilNanos < 0 && wall - untilWallMs < 0)) {
            quarantined = true;
            freeNanos = nanos + TimeUnit.MILLISECONDS.toNanos(quarantineMs);
            freeWallMs = wall + quarantineMs;
            if (attended(nanos, wall)) {
                state = State.LAPSED;
                log.warn("mirrord's lease lapsed: this host could not confirm it holds the flow's election; records "
                        + "are refused, and those buffered fail within their delivery timeout (docs/decisions.md §6)");
            } else {
                fence("mirrord's lease lapsed while its supervisor did not answer (frozen, or this JVM or host "
                        + "was paused)");
            }
        } else if (state == State.LAPSED && !attended(nanos, wall)) {
            fence("mirrord's supervisor stopped answering after its lease lapsed");
        }
        if (state == State.FENCED && !actedOn) {
            actedOn = true;
            onFenced.run();
        }
        return state;
    }

    private boolean attended(long nanos, long wall) {
        return pulsed && nanos - pulseNanos <= ATTENDED_NANOS && wall - pulseWallMs <= ATTENDED_MS;
    }

    private void fence(String why) {
        state = State.FENCED;
        log.error("{}: halting, so that records still buffered are never delivered", why);
    }

    private void notePulse() {
        if (state != State.FENCED) {
            pulseNanos = clock.nanos();
            pulseWallMs = clock.wallMillis();
            pulsed = true;
        }
    }

    private void watch() {
        while (true) {
            observe();
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(CHECK_MS));
        }
    }
}
