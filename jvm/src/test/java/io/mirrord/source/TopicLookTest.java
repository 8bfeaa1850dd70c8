package io.mirrord.source;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

public class TopicLookTest {
    static final TopicPartition OLD = new TopicPartition("orders", 0);
    static final TopicPartition NEW = new TopicPartition("payments", 0);

    final MockConsumer<byte[], byte[]> consumer = new MockConsumer<>(OffsetResetStrategy.EARLIEST);
    final TopicLook look = new TopicLook(consumer, SourceOptions.parse(Map.of("subscribePattern", ".*",
            "kafka.bootstrap.servers", "source:9092", "topic.refresh.ms", "5000")), 0);

    void exists(TopicPartition tp) {
        consumer.updatePartitions(tp.topic(), List.of(new PartitionInfo(tp.topic(), tp.partition(), null, null, null)));
    }

    @AfterEach
    void forget() {
        TargetCopies.forget();
    }

    @Test
    void untoldANewPartitionIsTakenUpOnceSeenAtLooksARefreshApart() {
        exists(OLD);
        exists(NEW);
        assertEquals(Set.of(), look.change(Set.of(OLD), 0).ready(), "first seen: its copy may not exist yet");
        assertEquals(5_000, look.lookEveryMs(), "nobody tells this JVM of copies: a cluster's executor");
        assertEquals(Set.of(NEW), look.change(Set.of(OLD), 5_000).ready());
        assertEquals(5_000, look.lookEveryMs());
    }

    @Test
    void aNewPartitionWhoseCopyTheSupervisorMadeIsTakenUpAtItsFirstLook() {
        exists(OLD);
        exists(NEW);
        TargetCopies.exist(Map.of("orders", 1));
        assertEquals(Set.of(), look.change(Set.of(OLD), 0).ready(), "its copy not made yet");
        assertEquals(1_000, look.lookEveryMs(), "a partition waits: looked at again within a second");
        assertEquals(Set.of(), look.change(Set.of(OLD), 1_000).ready(), "a second after: still no copy");
        TargetCopies.exist(Map.of("payments", 1));
        assertEquals(Set.of(NEW), look.change(Set.of(OLD), 2_000).ready());
        assertEquals(5_000, look.lookEveryMs(), "nothing waits");
    }

    @Test
    void aPartitionAddedToATopicWaitsForItsCopyToGrow() {
        TopicPartition second = new TopicPartition("orders", 1);
        consumer.updatePartitions("orders", List.of(new PartitionInfo("orders", 0, null, null, null),
                new PartitionInfo("orders", 1, null, null, null)));
        TargetCopies.exist(Map.of("orders", 1));
        assertEquals(Set.of(), look.change(Set.of(OLD), 0).ready());
        TargetCopies.exist(Map.of("orders", 2));
        assertEquals(Set.of(second), look.change(Set.of(OLD), 1_000).ready());
        assertTrue(look.change(Set.of(OLD, second), 2_000).none());
    }
}
