package io.mirrord.positions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** The one owner of positions: forward within an incarnation, never past a record of the current one. */
class PositionsTest {
    private static final TopicPartition TP = new TopicPartition("orders", 0);

    private static long next(Positions positions) {
        OffsetAndMetadata o = positions.uncommitted().get(TP);
        return o == null ? -1 : o.offset();
    }

    @Test
    void acknowledgementsMoveThePositionForwardOnlyInThePlannedIncarnation() {
        Positions positions = new Positions();
        long incarnation = positions.incarnations(List.of(TP)).get(TP);
        positions.acknowledged(TP, incarnation, 40);
        positions.acknowledged(TP, incarnation, 30);  // an older producer's: never back
        positions.acknowledged(TP, Incarnations.UNKNOWN, 90);  // read where the driver did not plan: not counted
        assertEquals(40, next(positions));
        positions.batchEnded(Map.of(TP, 45L), Map.of(TP, incarnation));  // past markers and dropped records
        assertEquals(45, next(positions));
        assertEquals("{\"orders\":{\"0\":45}}", positions.json());
    }

    @Test
    void aBatchEndingBelowThePositionBeginsANewIncarnationAndTheOldOnesAcknowledgementsAreIgnored() {
        Positions positions = new Positions();
        long first = positions.incarnations(List.of(TP)).get(TP);
        positions.acknowledged(TP, first, 50);
        positions.batchEnded(Map.of(TP, 5L), Map.of(TP, first));  // the topic was recreated under the reader
        assertEquals(5, next(positions));
        positions.acknowledged(TP, first, 50);  // the old topic's last acknowledgements, arriving late
        assertEquals(5, next(positions));
        long second = positions.incarnations(List.of(TP)).get(TP);
        assertTrue(second > first);
        positions.acknowledged(TP, second, 8);
        assertEquals(8, next(positions));
    }

    @Test
    void aTopicWhoseIdChangedIsReadFromItsStartAndCommitsNothingUntilItsNewIncarnationIsAcknowledged() {
        Positions positions = new Positions();
        long first = positions.incarnations(List.of(TP)).get(TP);
        positions.topicIds(Map.of("orders", "old"));
        positions.acknowledged(TP, first, 50);
        assertEquals("mirrord topic-id=old\0", positions.uncommitted().get(TP).metadata());
        positions.committed(positions.uncommitted());
        positions.topicIds(Map.of("orders", "new"));
        assertTrue(positions.uncommitted().isEmpty());  // nothing known of the new topic yet
        positions.acknowledged(TP, first, 60);  // the old incarnation's, or the new one's read as the old: ignored
        positions.batchEnded(Map.of(TP, 70L), Map.of(TP, first));  // a batch planned before the change
        assertTrue(positions.uncommitted().isEmpty());
        assertEquals(Set.of(TP), positions.takeRewound(List.of(TP)));
        assertEquals(Set.of(), positions.takeRewound(List.of(TP)));
        long second = positions.incarnations(List.of(TP)).get(TP);
        positions.acknowledged(TP, second, 3);
        assertEquals(new OffsetAndMetadata(3, "mirrord topic-id=new\0"), positions.uncommitted().get(TP));
    }

    @Test
    void aBatchOfAnEarlierRunIsLeftToTheAcknowledgements() {
        Positions positions = new Positions();
        positions.batchEnded(Map.of(TP, 70L), Map.of());
        assertTrue(positions.uncommitted().isEmpty());
    }

    @Test
    void aPositionCommittedBeforeItsTopicsIdWasKnownIsCommittedAgainNamingIt() {
        Positions positions = new Positions();
        long incarnation = positions.incarnations(List.of(TP)).get(TP);
        positions.acknowledged(TP, incarnation, 10);
        assertEquals("", positions.uncommitted().get(TP).metadata());  // the id is asked for on another thread
        positions.committed(positions.uncommitted());
        positions.topicIds(Map.of("orders", "id-1"));
        assertEquals(new OffsetAndMetadata(10, Positions.METADATA_PREFIX + "id-1\0"), positions.uncommitted().get(TP));
        positions.committed(positions.uncommitted());
        positions.topicIds(Map.of("orders", "id-1"));  // the same id again: nothing moved
        assertTrue(positions.uncommitted().isEmpty());
    }

    @Test
    void onlyWhatMovedIsCommittedAndNothingOfADeletedTopic() {
        Positions positions = new Positions();
        long incarnation = positions.incarnations(List.of(TP)).get(TP);
        positions.acknowledged(TP, incarnation, 10);
        positions.committed(positions.uncommitted());
        assertTrue(positions.uncommitted().isEmpty());
        positions.acknowledged(TP, incarnation, 11);
        assertEquals(11, next(positions));
        positions.deleted(Set.of("orders"), 0);
        assertTrue(positions.uncommitted().isEmpty());  // a commit for a deleted topic would be refused
        assertEquals(Set.of("orders"), positions.topics());  // its id is still asked for
        positions.deleted(Set.of("orders"), Positions.DELETED_KEPT_MS + 1);
        assertEquals(Set.of(), positions.topics());
        assertEquals("{}", positions.json());
    }

    @Test
    void aTopicDeletedAndRecreatedBetweenTwoLooksIsANewIncarnationReadFromItsStart() {
        Positions positions = new Positions();
        long first = positions.incarnations(List.of(TP)).get(TP);
        positions.topicIds(Map.of("orders", "old"));
        positions.acknowledged(TP, first, 500);
        positions.committed(positions.uncommitted());
        positions.deleted(Set.of("orders"), 0);  // seen gone at one look, back under another id at the next
        positions.topicIds(Map.of("orders", "new"));
        positions.acknowledged(TP, first, 1000);  // the new topic read on from the old offset: not counted
        assertTrue(positions.uncommitted().isEmpty());
        assertEquals(Set.of(TP), positions.takeRewound(List.of(TP)));
        positions.readFromStart(List.of(TP), Map.of());  // the next batch plans it from its start
        long second = positions.incarnations(List.of(TP)).get(TP);
        positions.acknowledged(TP, second, 500);  // as far as the old one was committed: committed again, new id...
        assertTrue(positions.uncommitted().isEmpty());  // ...once the owner asked the id of what it reads now
        positions.topicIds(Map.of("orders", "new"));
        assertEquals(new OffsetAndMetadata(500, "mirrord topic-id=new\0"), positions.uncommitted().get(TP));
    }

    @Test
    void partitionsReadFromTheirStartHaveTheirTopicsIdsAskedForAtOnceNotAtTheNextRegularLook() {
        Positions positions = new Positions();
        assertFalse(positions.takeIdsWanted());
        positions.readFromStart(List.of(TP), Map.of());  // a query's first batch: until the id is asked, the next one is theirs
        assertTrue(positions.takeIdsWanted());
        assertFalse(positions.takeIdsWanted(), "asked once");
        positions.readFromStart(List.of(), Map.of());
        assertFalse(positions.takeIdsWanted());
    }

    @Test
    void aPartitionAReaderAlreadyReadFromTheNewTopicsStartIsNotReadFromItsStartAgain() {
        for (boolean idSeenFirst : new boolean[] {true, false}) {
            Positions positions = new Positions();
            long first = positions.incarnations(List.of(TP)).get(TP);
            positions.topicIds(Map.of("orders", "old"));
            positions.acknowledged(TP, first, 500);
            positions.deleted(Set.of("orders"), 0);
            if (idSeenFirst) {  // the owner sees the new id before the batch ends...
                positions.topicIds(Map.of("orders", "new"));
            }
            positions.readFromStart(List.of(TP), Map.of());  // ...in which a reader found it recreated and read it from its start
            positions.topicIds(Map.of("orders", "new"));
            assertEquals(Set.of(), positions.takeRewound(List.of(TP)), "id seen first: " + idSeenFirst);
            assertTrue(positions.incarnations(List.of(TP)).get(TP) > first);
        }
    }

    @Test
    void aTopicRecreatedAfterItsIdWasAskedForTheReadFromItsStartIsSeenRecreatedAtTheOwnersFirstLook() {
        Positions positions = new Positions();
        positions.readFromStart(List.of(TP), Map.of("orders", "old"));  // the batch asked the id, then the offsets
        long first = positions.incarnations(List.of(TP)).get(TP);
        positions.acknowledged(TP, first, 500);
        assertEquals(new OffsetAndMetadata(500, "mirrord topic-id=old\0"), positions.uncommitted().get(TP));
        positions.topicIds(Map.of("orders", "new"));  // the owner's first look, after a recreation
        assertEquals(Set.of(TP), positions.takeRewound(List.of(TP)));  // read from its start again: nothing lost
        assertTrue(positions.uncommitted().isEmpty());
    }

    @Test
    void idsAskedBeforeAPlansOffsetsAreThePartitionsOwnSoARecreationAfterThemIsSeen() {
        Positions positions = new Positions();
        assertEquals(Set.of("orders"), positions.withoutIds(List.of(TP)));
        positions.idsAsked(List.of(TP), Map.of("orders", "old"));  // a query's first plan, before its offsets
        assertEquals(Set.of(), positions.withoutIds(List.of(TP)));
        long first = positions.incarnations(List.of(TP)).get(TP);
        positions.acknowledged(TP, first, 500);
        positions.idsAsked(List.of(TP), Map.of("orders", "new"));  // a later plan's answer does not replace it...
        positions.topicIds(Map.of("orders", "new"));  // ...the owner's look sees the recreation
        assertEquals(Set.of(TP), positions.takeRewound(List.of(TP)));
        assertTrue(positions.incarnations(List.of(TP)).get(TP) > first);
    }
}
