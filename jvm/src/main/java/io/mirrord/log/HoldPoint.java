package io.mirrord.log;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

/**
 * Test hooks for the tests that need the JVM stopped at a point (tests/faults/test_exactly_once.py,
 * tests/integration/test_positions.py): with the environment variable {@value #VARIABLE} naming one of the points
 * below, the first thread of this JVM to reach it says so on stderr ({@code mirrord test hold: <point>}) and waits
 * there a minute, or until the file {@value #UNTIL} names exists, so that the test can kill -9 the process at that
 * point, or change the source under it. Unset (always, outside the tests) it costs one comparison.
 *
 * <ul>
 *   <li>{@code init}: a stream's producer has just bumped its epoch ({@code initTransactions}), nothing written yet;
 *   <li>{@code open}: a transaction holds records, not committed;
 *   <li>{@code commit}: the records, positions and syncs are sent and the commit is about to be asked for;
 *   <li>{@code boundary}: a Spark task (a batch) ended and its last transaction is about to commit;
 *   <li>{@code ids}: the positions' owner is about to ask the source for the ids of the topics it holds positions of,
 *       for the first time.
 * </ul>
 */
public final class HoldPoint {
    static final String VARIABLE = "MIRRORD_TEST_HOLD_AT";
    static final String UNTIL = "MIRRORD_TEST_HOLD_UNTIL";
    private static final String HOLD = System.getenv(VARIABLE);
    private static final AtomicBoolean HELD = new AtomicBoolean();

    private HoldPoint() {
    }

    public static void reach(String point) {
        if (HOLD != null && HOLD.equals(point) && HELD.compareAndSet(false, true)) {
            System.err.println("mirrord test hold: " + point);
            System.err.flush();
            String until = System.getenv(UNTIL);
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (System.nanoTime() < end && (until == null || !Files.exists(Path.of(until)))) {
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50));
                if (Thread.currentThread().isInterrupted()) {
                    return;
                }
            }
        }
    }
}
