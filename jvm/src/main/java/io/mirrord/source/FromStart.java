package io.mirrord.source;

import io.mirrord.positions.GroupCommitter;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.TopicPartition;

/**
 * The partitions a real-time stream took up from their start on its own in this batch (new, or recreated under
 * it), and the ids their topics had just before it read them: asked through the positions' owner where it runs in
 * this JVM (local mode; none on a cluster's executor, where the owner's next id is taken as the reading's). The
 * batch's end compares them with the ids the source names then: a topic recreated under the reading, refilled past
 * where the stream read to, is read again from its start by the next batch (docs/decisions.md §10).
 */
final class FromStart {
    final Set<TopicPartition> partitions = new HashSet<>();
    final Map<String, String> ids = new HashMap<>();  // topic -> its id before this stream's last read of it

    /** Asked before these partitions are sought to their start: an id no newer than what is read under it. */
    void ask(Collection<TopicPartition> about) {
        Set<String> topics = new HashSet<>();
        about.forEach(tp -> topics.add(tp.topic()));
        ids.keySet().removeAll(topics);  // an id asked for an earlier reading is not this one's
        ids.putAll(GroupCommitter.topicIdsNow(topics));
    }

    void add(TopicPartition tp) {
        partitions.add(tp);
    }

    void clear() {
        partitions.clear();
        ids.clear();
    }
}
