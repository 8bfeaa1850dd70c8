package io.mirrord.sink;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Test hooks for the exactly-once kill tests (tests/faults/test_exactly_once.py): with the environment variable
 * {@value #VARIABLE} naming one of the points below, the first thread of this JVM to reach it says so on stderr
 * ({@code mirrord test hold: <point>}) and waits there a minute, so that the test can kill -9 the process at that
 * point. Unset (always, outside the tests) it costs one comparison.
 *
 * <ul>
 *   <li>{@code init}: a stream's producer has just bumped its epoch ({@code initTransactions}), nothing written yet;
 *   <li>{@code open}: a transaction holds records, not committed;
 *   <li>{@code commit}: the records, positions and syncs are sent and the commit is about to be asked for;
 *   <li>{@code boundary}: a Spark task (a batch) ended and its last transaction is about to commit.
 * </ul>
 */
final class HoldPoint {
    static final String VARIABLE = "MIRRORD_TEST_HOLD_AT";
    private static final String HOLD = System.getenv(VARIABLE);
    private static final AtomicBoolean HELD = new AtomicBoolean();

    private HoldPoint() {
    }

    static void reach(String point) {
        if (HOLD != null && HOLD.equals(point) && HELD.compareAndSet(false, true)) {
            System.err.println("mirrord test hold: " + point);
            System.err.flush();
            try {
                Thread.sleep(60_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
