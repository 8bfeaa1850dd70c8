package io.mirrord.sink;

import io.mirrord.fencing.Fence;
import io.mirrord.fencing.FencedError;
import io.mirrord.log.WarnLimiter;

import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.errors.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A transaction's commit, asked again while it times out and the lease holds (docs/decisions.md §12). Under leader
 * election the producer waits {@code max.block.ms} for the commit's answer (1 s with the default session); a target
 * stalled past that (a broker's pause, a leader moving) is waited for as long as a commit waits without election
 * ({@value #WAIT_MS} ms, mirrord/spark/exactly_once.py's MAX_BLOCK_MS: longer is an outage, which the supervisor
 * handles), not failed at once with a query restart. Kafka allows a commit that timed out to be asked again, and
 * nothing else (not an abort): the producer waits on for the commit it began. Each try looks at the lease first:
 * once it has lapsed the commit fails ({@link FencedError}), and the next owner's {@code initTransactions} settles
 * the transaction on the broker.
 */
final class CommitWait {
    private static final Logger log = LoggerFactory.getLogger(CommitWait.class);
    static final long WAIT_MS = 60_000;
    private final WarnLimiter lines = new WarnLimiter(60_000);  // a line a minute at most
    private final BooleanSupplier lease;
    private final LongSupplier clockMs;

    /** {@code lease}: whether this JVM may still send ({@link Fence#open}); {@code clockMs}: a monotonic clock. */
    CommitWait(BooleanSupplier lease, LongSupplier clockMs) {
        this.lease = lease;
        this.clockMs = clockMs;
    }

    void commit(Producer<?, ?> producer, String id) {
        long start = clockMs.getAsLong();
        while (true) {
            try {
                producer.commitTransaction();
                return;
            } catch (TimeoutException e) {
                long waited = clockMs.getAsLong() - start;
                if (waited >= WAIT_MS) {
                    throw e;  // an outage: the transaction fails, the supervisor waits for the target (§5)
                }
                if (!lease.getAsBoolean()) {
                    throw new FencedError("transaction of " + id + " not committed: the target did not answer its "
                            + "commit for " + waited + " ms and this host's lease lapsed meanwhile");
                }
                long held = lines.admit();
                if (held >= 0) {
                    log.warn("transactional id {}: the target has not answered the commit for {} ms; waiting for it "
                            + "({})", id, waited, e.getMessage());
                }
            }
        }
    }
}
