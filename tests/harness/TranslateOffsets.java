// MirrorMaker 2's own client reads mirrord's checkpoints: RemoteClusterUtils.translateOffsets, as a failover
// runbook written for MirrorMaker 2 calls it. Run as a single source file:
//   java -cp '.cache/jars/kafka/*' tests/harness/TranslateOffsets.java BOOTSTRAP REMOTE_ALIAS GROUP
// Prints one line per partition: topic partition offset, then tab and the checkpoint's metadata.
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class TranslateOffsets {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        RemoteClusterUtils.translateOffsets(props, args[1], args[2], Duration.ofSeconds(30))
            .forEach((tp, om) -> System.out.println(tp.topic() + " " + tp.partition() + " " + om.offset() + "\t"
                + om.metadata()));
    }
}
