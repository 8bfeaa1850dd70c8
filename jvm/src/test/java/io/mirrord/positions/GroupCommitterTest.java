package io.mirrord.positions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.junit.jupiter.api.Test;

/**
 * What each tick of the committer commits to the source group: what moved, and every position once per
 * interval, so that an idle partition's committed offset never reaches the group's retention.
 */
class GroupCommitterTest {
    private static final long HOUR = 3_600_000;
    private static final TopicPartition IDLE = new TopicPartition("orders", 0);
    private static final TopicPartition BUSY = new TopicPartition("orders", 1);

    private final Positions positions = new Positions();
    private final List<String> commits = new ArrayList<>();
    private long now = 1_000_000;
    private boolean unreachable;
    private final GroupCommitter committer = new GroupCommitter(positions, () -> now, offsets -> {
        if (unreachable) {
            throw new TimeoutException("the source does not answer");
        }
        Map<String, Long> sorted = new TreeMap<>();
        offsets.forEach((tp, o) -> sorted.put(tp.toString(), o.offset()));
        commits.add(sorted.toString());
    }, HOUR);

    /** One tick at {@code at}: what it committed ("" for nothing). */
    private String tick(long at) {
        now = at;
        int before = commits.size();
        assertTrue(committer.commit());
        return commits.size() == before ? "" : commits.get(commits.size() - 1);
    }

    @Test
    void anIdlePartitionIsCommittedAgainOnceTheIntervalPassedAndWhatMovedAtEveryTick() {
        long start = now;
        Map<TopicPartition, Long> planned = positions.incarnations(List.of(IDLE, BUSY));
        positions.batchEnded(Map.of(IDLE, 10L, BUSY, 20L), planned);
        assertEquals("{orders-0=10, orders-1=20}", tick(start));
        positions.acknowledged(BUSY, planned.get(BUSY), 25);
        assertEquals("{orders-1=25}", tick(start + 250));
        assertEquals("", tick(start + 500));
        positions.acknowledged(BUSY, planned.get(BUSY), 30);
        assertEquals("{orders-1=30}", tick(start + HOUR - 1));
        assertEquals("{orders-0=10, orders-1=30}", tick(start + HOUR));  // the idle one, before it expires
        assertEquals("", tick(start + HOUR + 250));
        positions.acknowledged(BUSY, planned.get(BUSY), 31);
        assertEquals("{orders-1=31}", tick(start + 2 * HOUR - 1));
        assertEquals("{orders-0=10, orders-1=31}", tick(start + 2 * HOUR));
    }

    @Test
    void aRoundThatCouldNotCommitEveryPositionIsTriedAgainAtTheNextTick() {
        long start = now;
        Map<TopicPartition, Long> planned = positions.incarnations(List.of(IDLE, BUSY));
        positions.batchEnded(Map.of(IDLE, 10L, BUSY, 20L), planned);
        assertEquals("{orders-0=10, orders-1=20}", tick(start));
        unreachable = true;
        now = start + HOUR;
        assertFalse(committer.commit());
        unreachable = false;
        assertEquals("{orders-0=10, orders-1=20}", tick(start + HOUR + 250));
        assertEquals("", tick(start + HOUR + 500));
    }

    @Test
    void everyPositionIsDueAtHalfTheRetentionTheSourceReportsOrEveryHour() {
        assertEquals(84 * HOUR, GroupCommitter.roundEveryMs("10080"));  // Kafka's default: 7 days
        assertEquals(30_000, GroupCommitter.roundEveryMs("1"));
        assertEquals(HOUR, GroupCommitter.roundEveryMs(null));
        assertEquals(HOUR, GroupCommitter.roundEveryMs("0"));
        assertEquals(HOUR, GroupCommitter.roundEveryMs("a week"));
    }
}
