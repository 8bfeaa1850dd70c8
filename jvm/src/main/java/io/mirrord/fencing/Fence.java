package io.mirrord.fencing;

import io.mirrord.sink.MirrorInterceptor;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The active host's lease, held in the JVM that sends the records and renewed by mirrord's supervisor
 * ({@link #renew}) while this host is the flow's elected one. When it lapses (the supervisor lost the
 * election, or stopped answering: a hung or stopped interpreter, while this JVM goes on), nothing more
 * may reach the target: {@link MirrorInterceptor#onSend} refuses every record at once, and a watchdog
 * thread halts the JVM, so records buffered in the producers are dropped with it, never delivered late.
 * The next host resumes from the offsets the target acknowledged, so nothing is lost.
 *
 * <p>Unarmed (never renewed, e.g. leader election off) it refuses nothing. {@link #release} disarms it
 * for a clean stop.
 */
public final class Fence {
    static final long CHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
    private static final Logger log = LoggerFactory.getLogger(Fence.class);
    private static volatile long expiresAt;  // System.nanoTime(); meaningful while armed
    private static volatile boolean armed;
    private static volatile Runnable onLapse = () -> Runtime.getRuntime().halt(75);  // EX_TEMPFAIL
    private static Thread watchdog;  // guarded by Fence.class

    private Fence() {
    }

    /**
     * The lease holds for {@code validForMs} from now; starts the watchdog on first use. A lease that lapsed
     * stays lapsed (a host frozen whole past its lease, then woken: its supervisor's renewal may come before
     * the watchdog's next look), so this returns false and changes nothing.
     */
    public static synchronized boolean renew(long validForMs) {
        if (armed && !open()) {
            return false;
        }
        expiresAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(validForMs);
        armed = true;
        if (watchdog == null) {
            watchdog = new Thread(Fence::watch, "mirrord-fence");
            watchdog.setDaemon(true);
            watchdog.start();
        }
        return true;
    }

    /** No lease any more, and none needed: the supervisor stopped mirroring on purpose. A lapsed one stays. */
    public static synchronized void release() {
        if (open()) {
            armed = false;
        }
    }

    /** For tests: unarmed, as at start. */
    static synchronized void reset() {
        armed = false;
    }

    /** Ends the lease now: the watchdog fences within {@link #CHECK_NANOS}. */
    public static void revoke() {
        expiresAt = System.nanoTime() - 1;
    }

    /** Whether records may be sent: no lease was ever taken, or the one taken has not lapsed. */
    public static boolean open() {
        return !armed || System.nanoTime() - expiresAt < 0;
    }

    /** For tests: what a lapse does instead of halting the JVM. */
    static void onLapse(Runnable action) {
        onLapse = action;
    }

    private static void watch() {
        Long fencedLease = null;  // the lease a lapse was acted on for: only reached in tests, where it returns
        while (true) {
            long lease = expiresAt;
            if (!open() && (fencedLease == null || fencedLease != lease)) {
                log.error("mirrord's lease lapsed (this host lost the flow's election, or its supervisor stopped "
                        + "renewing it): halting, so that records still buffered are never delivered");
                onLapse.run();
                fencedLease = lease;
            }
            LockSupport.parkNanos(CHECK_NANOS);
        }
    }
}
