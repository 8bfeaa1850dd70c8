package io.mirrord.sink;

import io.mirrord.fencing.FencedError;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

public class CommitWaitTest {
    /** A producer whose commit times out {@code stalls} times (the target stalled past max.block.ms), then commits. */
    static final class StalledCommits extends MockProducer<byte[], byte[]> {
        final AtomicLong clock = new AtomicLong();  // each timed-out ask takes the producer's max.block.ms
        int stalls;
        int asked;

        StalledCommits(int stalls) {
            super(true, new ByteArraySerializer(), new ByteArraySerializer());
            this.stalls = stalls;
            initTransactions();
            beginTransaction();
        }

        @Override
        public void commitTransaction() {
            asked++;
            if (stalls-- > 0) {
                clock.addAndGet(1_000);
                throw new TimeoutException("Timeout expired after 1000ms while awaiting EndTxn(COMMIT)");
            }
            super.commitTransaction();
        }
    }

    @Test
    void aCommitThatTimedOutIsAskedAgainUntilTheTargetAnswers() {
        StalledCommits producer = new StalledCommits(3);
        new CommitWait(() -> true, producer.clock::get).commit(producer, "mirrord-default-source-0");
        assertEquals(4, producer.asked);
        assertTrue(producer.transactionCommitted());
    }

    @Test
    void aLeaseThatLapsedWhileTheCommitWaitedFailsIt() {
        StalledCommits producer = new StalledCommits(Integer.MAX_VALUE);
        CommitWait wait = new CommitWait(() -> producer.asked < 2, producer.clock::get);  // the lease lapses during the second wait
        FencedError e = assertThrows(FencedError.class, () -> wait.commit(producer, "mirrord-default-source-0"));
        assertTrue(e.getMessage().contains("lease lapsed"), e.getMessage());
        assertEquals(2, producer.asked, "no commit asked once the lease lapsed");
    }

    @Test
    void aCommitStillUnansweredAfterAMinuteFailsAsAnOutage() {
        StalledCommits producer = new StalledCommits(Integer.MAX_VALUE);
        CommitWait wait = new CommitWait(() -> true, producer.clock::get);
        assertThrows(TimeoutException.class, () -> wait.commit(producer, "mirrord-default-source-0"));
        assertEquals(CommitWait.WAIT_MS / 1_000, producer.asked);
    }
}
