// Kafka's own MirrorMaker 2 classes decode what mirrord wrote: Heartbeat, Checkpoint (connect-mirror-client)
// and OffsetSync (connect-mirror) read every record of a topic up to its end offsets. Run as a single source
// file, with Kafka's jars and connect-mirror on the class path:
//   java -cp '.cache/jars/kafka/*:.cache/jars/mm2/connect-mirror-4.2.0.jar' tests/harness/DecodeMirrorTopics.java \
//        BOOTSTRAP heartbeat|checkpoint|offset-sync TOPIC
// Prints one line per record: partition, offset, then the decoded fields, tab-separated.
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.mirror.Checkpoint;
import org.apache.kafka.connect.mirror.Heartbeat;
import org.apache.kafka.connect.mirror.OffsetSync;

public class DecodeMirrorTopics {
    public static void main(String[] args) {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        props.put("enable.auto.commit", "false");
        try (KafkaConsumer<byte[], byte[]> consumer =
                     new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor(args[2], Duration.ofSeconds(30)).stream()
                    .map(p -> new TopicPartition(p.topic(), p.partition())).collect(Collectors.toList());
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (partitions.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("could not read " + args[2] + " to its end offsets " + ends);
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    // a tombstone (a retired writer's key, docs/decisions.md §7) is no record of MirrorMaker 2's:
                    // its readers skip it, as mirrord's do
                    if (record.value() != null
                            && record.offset() < ends.get(new TopicPartition(record.topic(), record.partition()))) {
                        System.out.println(record.partition() + "\t" + record.offset() + "\t" + decode(args[1], record));
                    }
                }
            }
        }
    }

    private static String decode(String kind, ConsumerRecord<byte[], byte[]> record) {
        switch (kind) {
            case "heartbeat": {
                Heartbeat h = Heartbeat.deserializeRecord(record);
                return h.sourceClusterAlias() + "\t" + h.targetClusterAlias() + "\t" + h.timestamp();
            }
            case "checkpoint": {
                Checkpoint c = Checkpoint.deserializeRecord(record);
                return c.consumerGroupId() + "\t" + c.topicPartition().topic() + "\t" + c.topicPartition().partition()
                        + "\t" + c.upstreamOffset() + "\t" + c.downstreamOffset() + "\t" + c.metadata();
            }
            case "offset-sync": {
                OffsetSync s = OffsetSync.deserializeRecord(record);
                return s.topicPartition().topic() + "\t" + s.topicPartition().partition() + "\t" + s.upstreamOffset()
                        + "\t" + s.downstreamOffset();
            }
            default:
                throw new IllegalArgumentException("unknown kind " + kind + ": heartbeat, checkpoint or offset-sync");
        }
    }
}
