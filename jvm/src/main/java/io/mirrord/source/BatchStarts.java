package io.mirrord.source;

import io.mirrord.positions.GroupCommitter;
import io.mirrord.positions.Positions;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where each partition of a batch starts: where the last batch ended, or, for a partition new to the query or
 * recreated under it (the positions' owner saw its topic's id change), its first offset. The driver's side,
 * called by {@link GroupedStream} under its lock.
 */
final class BatchStarts {
    private static final Logger log = LoggerFactory.getLogger(BatchStarts.class);
    private static final long REPLANNED_WITHIN_MS = 2_000;  // a real-time batch lasts 5 s at least

    private final SourceMetadata metadata;
    private final Map<TopicPartition, Long> firsts = new HashMap<>();  // new partitions' start, as planned
    private final Set<TopicPartition> recreated = new HashSet<>();  // read from their start in the batch planned now
    // real-time mode: Spark plans each batch twice, the same start within milliseconds; the second plan is the
    // first's, so that a partition the owner says was recreated is read from its start by both
    private Map<TopicPartition, Long> rtStart;
    private Map<TopicPartition, Long> rtFrom;
    private long rtPlannedAt;

    BatchStarts(SourceMetadata metadata) {
        this.metadata = metadata;
    }

    /** Micro-batch mode: each partition's start in a batch that reads up to {@code ends}. */
    Map<TopicPartition, Long> of(Map<TopicPartition, Long> start, Map<TopicPartition, Long> ends) {
        Set<TopicPartition> unknown = new HashSet<>();
        for (TopicPartition tp : Positions.DRIVER.takeRewound(ends.keySet())) {
            recreated.add(tp);
            firsts.remove(tp);
        }
        ends.forEach((tp, end) -> {
            Long from = start.get(tp);
            if (from != null && from <= end && !recreated.contains(tp)) {
                firsts.remove(tp);
            } else if (!firsts.containsKey(tp)) {
                unknown.add(tp);  // new, or recreated below where it was read to
            }
        });
        if (!unknown.isEmpty()) {
            Map<TopicPartition, Long> found = readFromStart(unknown);
            firsts.putAll(found);
            unknown.removeAll(found.keySet());
            unknown.forEach(tp -> firsts.put(tp, ends.get(tp)));  // deleted meanwhile: nothing to read
        }
        Map<TopicPartition, Long> from = new HashMap<>();
        ends.forEach((tp, end) -> {
            Long at = start.get(tp);
            from.put(tp, at == null || at > end || recreated.contains(tp) ? firsts.get(tp) : at);
        });
        return from;
    }

    /** Micro-batch mode: the batch whose starts were asked last is planned; its recreated partitions are read. */
    void planned() {
        recreated.clear();
    }

    /** Real-time mode: each partition's start in the batch that begins at {@code start}, the same for a replan. */
    Map<TopicPartition, Long> realTime(Map<TopicPartition, Long> start) {
        long now = System.currentTimeMillis();
        if (!start.equals(rtStart) || now - rtPlannedAt >= REPLANNED_WITHIN_MS) {
            rtStart = start;
            rtFrom = realTimeStarts(start);
            rtPlannedAt = now;
        }
        return rtFrom;
    }

    private Map<TopicPartition, Long> realTimeStarts(Map<TopicPartition, Long> start) {
        Set<TopicPartition> partitions = metadata.partitions(false);
        Set<TopicPartition> fresh = new HashSet<>(partitions);
        fresh.removeAll(start.keySet());
        fresh.addAll(Positions.DRIVER.takeRewound(partitions));
        Map<TopicPartition, Long> from = new HashMap<>();
        start.forEach((tp, offset) -> {
            if (partitions.contains(tp) && !fresh.contains(tp)) {
                from.put(tp, offset);
            }
        });
        if (!fresh.isEmpty()) {
            from.putAll(readFromStart(fresh));
        }
        return from;
    }

    /**
     * The first offsets of those of {@code partitions} that exist; the owner is told they are read from there, in
     * the incarnations of their topics' ids, asked for first: a topic recreated after that has another id when the
     * owner looks, and is read from its start again (docs/decisions.md §10).
     */
    private Map<TopicPartition, Long> readFromStart(Set<TopicPartition> partitions) {
        Set<String> topics = new HashSet<>();
        partitions.forEach(tp -> topics.add(tp.topic()));
        Map<String, String> ids = GroupCommitter.topicIdsNow(topics);
        Map<TopicPartition, Long> found = metadata.firstOffsetsOfExisting(partitions);
        log.info("new partitions, read from their start: {}", found);
        Positions.DRIVER.readFromStart(found.keySet(), ids);
        return found;
    }

    /**
     * The ids of those of these partitions' topics the owner does not know yet, asked now, before a batch's offsets
     * are: the topic the offsets are in, not one recreated before the owner's next look (docs/decisions.md §10).
     */
    static void askIds(Collection<TopicPartition> partitions) {
        Set<String> topics = Positions.DRIVER.withoutIds(partitions);
        if (!topics.isEmpty()) {
            Positions.DRIVER.idsAsked(partitions, GroupCommitter.topicIdsNow(topics));
        }
    }

    /** Ends that make at most {@code max} records in all, each partition its share of what waits. */
    static Map<TopicPartition, Long> capped(Map<TopicPartition, Long> from, Map<TopicPartition, Long> ends,
                                            long max) {
        long total = 0;
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            total += Math.max(0, e.getValue() - from.get(e.getKey()));
        }
        if (total <= max) {
            return ends;
        }
        Map<TopicPartition, Long> capped = new HashMap<>();
        double share = (double) max / total;
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            long begin = from.get(e.getKey());
            long waiting = Math.max(0, e.getValue() - begin);
            capped.put(e.getKey(), waiting == 0 ? e.getValue() : begin + Math.max(1, (long) (waiting * share)));
        }
        return capped;
    }
}
