package io.mirrord.sink;

import io.mirrord.fencing.FencedError;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The streams' senders this JVM keeps between their tasks, so that a stream's producer is made once per query
 * start and not once per batch. Static because Spark gives a {@code ForeachWriter}'s copies in one JVM no
 * other handle on each other. Busy senders with something due by time ({@link StreamSender#tick}) are ticked
 * by a timer while their task waits for records.
 */
final class StreamSenders {
    private static final Logger log = LoggerFactory.getLogger(StreamSenders.class);
    private static final Map<String, Idle> IDLE = new ConcurrentHashMap<>();
    private static final Set<StreamSender> BUSY = ConcurrentHashMap.newKeySet();
    private static final ScheduledExecutorService TIMER = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "mirrord-transactions");
        t.setDaemon(true);
        return t;
    });
    private static volatile boolean ticking;

    /** A stream's sender between its tasks, with the query start and the batch whose task used it last. */
    record Idle(StreamSender sender, String run, long epoch) {
    }

    private StreamSenders() {
    }

    /**
     * The sender kept under {@code id} if {@code continues} says the task may go on with it, else one made by
     * {@code create} (the kept one closed first); busy until {@link #done}.
     */
    static StreamSender claim(String id, Predicate<Idle> continues, Supplier<StreamSender> create) {
        Idle kept = IDLE.remove(id);
        if (kept != null && !continues.test(kept)) {
            kept.sender().close();
            kept = null;
        }
        StreamSender claimed = kept != null ? kept.sender() : create.get();
        BUSY.add(claimed);
        return claimed;
    }

    /** Ticks busy senders every {@code tickMs} from now on (exactly once: timed commits). */
    static void tickEvery(long tickMs) {
        if (!ticking) {
            synchronized (StreamSenders.class) {
                if (!ticking) {
                    TIMER.scheduleWithFixedDelay(StreamSenders::tick, tickMs, tickMs, TimeUnit.MILLISECONDS);
                    ticking = true;
                }
            }
        }
    }

    /** The task of {@code sender} ended; {@code keep}: kept for the stream's next task, else closed already. */
    static void done(StreamSender sender, boolean keep, String run, long epoch) {
        BUSY.remove(sender);
        if (keep) {
            Idle earlier = IDLE.put(sender.id(), new Idle(sender, run, epoch));
            if (earlier != null && earlier.sender() != sender) {
                earlier.sender().close();
            }
        }
    }

    /** Closes every sender this JVM keeps (the query stopped, or the executor): what they hold is delivered. */
    static void closeAll() {
        for (String id : List.copyOf(IDLE.keySet())) {
            Idle idle = IDLE.remove(id);
            if (idle != null) {
                idle.sender().close();
            }
        }
    }

    /** Records every sender of this JVM sent and the target has not yet acknowledged or failed. */
    static long inFlight() {
        long total = 0;
        for (Idle idle : IDLE.values()) {
            total += idle.sender().inFlight();
        }
        for (StreamSender busy : BUSY) {
            total += busy.inFlight();
        }
        return total;
    }

    private static void tick() {
        for (StreamSender sender : BUSY) {
            try {
                sender.tick();
            } catch (RuntimeException | FencedError e) {
                // remembered by the sender (a lapsed lease: by the fence), so its task's next send or its end fails
                // with it; the timer goes on (a timer task that throws is never run again)
                log.debug("timed work of {} failed: {}", sender.id(), e.toString());
            }
        }
    }
}
