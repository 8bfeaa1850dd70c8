package io.mirrord.source;

import io.mirrord.positions.GroupCommitter;
import io.mirrord.positions.Positions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's side of the source: which partitions there are, where each batch starts and (micro-batch
 * mode) ends, and which stream reads what ({@link Assignment}). One consumer here asks the source cluster
 * for metadata and offsets; the topic list is asked at most every {@code topic.refresh.ms}, not at every
 * batch. An unreachable source is waited for, asked again every second, not failed: an outage is a state.
 *
 * <p>Micro-batch mode: a batch reads from the last batch's end to the partitions' log end offsets (at most
 * {@code maxOffsetsPerTrigger} records), one task per stream with something to read. Real-time mode: every
 * stream gets a task for the whole batch, reading from where the last batch ended until the clock ends it,
 * and picking up new partitions on its own; the batch's end offsets are the streams' own positions.
 */
final class GroupedStream implements MicroBatchStream, SupportsRealTimeMode, SupportsAdmissionControl {
    private static final Logger log = LoggerFactory.getLogger(GroupedStream.class);
    private static final Duration ASK_TIMEOUT = Duration.ofSeconds(1);
    private static final long EARLIEST = -2;
    private static final long LATEST = -1;
    private static final long REPLANNED_WITHIN_MS = 2_000;  // a real-time batch lasts 5 s at least

    private final SourceOptions options;
    private final String run = UUID.randomUUID().toString();
    private KafkaConsumer<byte[], byte[]> metadata;
    private Set<TopicPartition> listed;
    private long listedAt;
    private Map<TopicPartition, Long> latest;
    private final Map<TopicPartition, Long> firsts = new HashMap<>();  // new partitions' start, as planned
    private final Set<TopicPartition> recreated = new HashSet<>();  // read from their start in the batch planned now
    private Map<TopicPartition, Long> planned = Map.of();  // the last planned batch's incarnations
    // real-time mode: Spark plans each batch twice, the same start within milliseconds; the second plan is the
    // first's, so that a partition the owner says was recreated is read from its start by both
    private Map<TopicPartition, Long> rtStart;
    private Map<TopicPartition, Long> rtFrom;
    private long rtPlannedAt;
    private volatile boolean realTime;
    private volatile boolean stopped;

    GroupedStream(SourceOptions options) {
        this.options = options;
        if (options.positionsGroup != null) {
            GroupCommitter.start(options.positionsGroup, options.consumerConfig("positions"));
        }
    }

    @Override
    public void prepareForRealTimeMode() {
        realTime = true;
    }

    @Override
    public synchronized Offset initialOffset() {
        Set<TopicPartition> partitions = partitions(true);
        Map<TopicPartition, Long> start = new HashMap<>();
        String starting = options.starting;
        if (starting.startsWith("{")) {
            SourceOffset.parse(starting).offsets.forEach((tp, offset) -> {
                if (partitions.contains(tp)) {
                    start.put(tp, offset);
                }
            });
        }
        long fallback = "latest".equals(starting) ? LATEST : EARLIEST;
        partitions.forEach(tp -> start.putIfAbsent(tp, fallback));
        Set<TopicPartition> earliest = select(start, EARLIEST);
        Set<TopicPartition> atEnd = select(start, LATEST);
        if (!earliest.isEmpty()) {
            start.putAll(ask(() -> metadata().beginningOffsets(earliest, ASK_TIMEOUT)));
        }
        if (!atEnd.isEmpty()) {
            start.putAll(ask(() -> metadata().endOffsets(atEnd, ASK_TIMEOUT)));
        }
        return new SourceOffset(start);
    }

    private static Set<TopicPartition> select(Map<TopicPartition, Long> offsets, long value) {
        Set<TopicPartition> chosen = new HashSet<>();
        offsets.forEach((tp, offset) -> {
            if (offset == value) {
                chosen.add(tp);
            }
        });
        return chosen;
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        return options.maxOffsetsPerTrigger > 0 ? ReadLimit.maxRows(options.maxOffsetsPerTrigger)
            : ReadLimit.allAvailable();
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) is the one Spark calls");
    }

    @Override
    public synchronized Offset latestOffset(Offset startOffset, ReadLimit limit) {
        SourceOffset start = (SourceOffset) startOffset;
        if (realTime) {  // a real-time batch ends on the clock, where its streams stand
            return start;
        }
        Map<TopicPartition, Long> ends = ask(() -> metadata().endOffsets(partitions(false), ASK_TIMEOUT));
        latest = ends;
        Map<TopicPartition, Long> from = starts(start.offsets, ends);
        if (limit instanceof ReadMaxRows max) {
            return new SourceOffset(capped(from, ends, max.maxRows()));
        }
        return new SourceOffset(ends);
    }

    /** Where each partition of a batch starts: the last batch's end, or a new partition's first offset. */
    private Map<TopicPartition, Long> starts(Map<TopicPartition, Long> start, Map<TopicPartition, Long> ends) {
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
            Map<TopicPartition, Long> found = ask(() -> metadata().beginningOffsets(existing(unknown), ASK_TIMEOUT));
            log.info("new partitions, read from their start: {}", found);
            Positions.DRIVER.readFromStart(found.keySet());
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

    @Override
    public synchronized Offset reportLatestOffset() {
        return latest == null ? null : new SourceOffset(latest);
    }

    @Override
    public synchronized InputPartition[] planInputPartitions(Offset startOffset, Offset endOffset) {
        Map<TopicPartition, Long> ends = ((SourceOffset) endOffset).offsets;
        Map<TopicPartition, Long> from = starts(((SourceOffset) startOffset).offsets, ends);
        List<Map<TopicPartition, Long>> froms = groups();
        List<Map<TopicPartition, Long>> untils = groups();
        ends.forEach((tp, end) -> {
            long begin = from.get(tp);
            if (begin < end) {
                int stream = Assignment.streamOf(tp, options.streams);
                froms.get(stream).put(tp, begin);
                untils.get(stream).put(tp, end);
            }
        });
        recreated.clear();
        planned = Positions.DRIVER.incarnations(ends.keySet());
        Map<String, String> ids = Positions.DRIVER.topicIdsOf(ends.keySet());
        List<InputPartition> splits = new ArrayList<>();
        for (int i = 0; i < options.streams; i++) {
            if (!froms.get(i).isEmpty()) {
                splits.add(new StreamSplit(run, i, froms.get(i), untils.get(i), planned, ids, options));
            }
        }
        return splits.toArray(new InputPartition[0]);
    }

    @Override
    public synchronized InputPartition[] planInputPartitions(Offset startOffset) {
        Map<TopicPartition, Long> start = ((SourceOffset) startOffset).offsets;
        long now = System.currentTimeMillis();
        if (!start.equals(rtStart) || now - rtPlannedAt >= REPLANNED_WITHIN_MS) {
            rtStart = start;
            rtFrom = realTimeStarts(start);
            rtPlannedAt = now;
        }
        Map<TopicPartition, Long> from = rtFrom;
        List<Map<TopicPartition, Long>> froms = groups();
        from.forEach((tp, offset) -> froms.get(Assignment.streamOf(tp, options.streams)).put(tp, offset));
        planned = Positions.DRIVER.incarnations(from.keySet());
        Map<String, String> ids = Positions.DRIVER.topicIdsOf(from.keySet());
        InputPartition[] splits = new InputPartition[options.streams];
        for (int i = 0; i < options.streams; i++) {  // every stream, also one with nothing yet: it finds topics
            splits[i] = new StreamSplit(run, i, froms.get(i), null, planned, ids, options);
        }
        return splits;
    }

    /**
     * Where each partition of a real-time batch starts: the last batch's end, or the partition's first offset
     * (new, or recreated: the positions' owner saw its topic's id change).
     */
    private Map<TopicPartition, Long> realTimeStarts(Map<TopicPartition, Long> start) {
        Set<TopicPartition> partitions = partitions(false);
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
            Map<TopicPartition, Long> found = ask(() -> metadata().beginningOffsets(existing(fresh), ASK_TIMEOUT));
            log.info("new partitions, read from their start: {}", found);
            Positions.DRIVER.readFromStart(found.keySet());
            from.putAll(found);
        }
        return from;
    }

    private List<Map<TopicPartition, Long>> groups() {
        List<Map<TopicPartition, Long>> groups = new ArrayList<>();
        for (int i = 0; i < options.streams; i++) {
            groups.add(new HashMap<>());
        }
        return groups;
    }

    /**
     * The real-time batch's end: where its streams stand. Partitions a stream found recreated under it and read
     * again from their start (or found new) are in the topic's new incarnation already: the owner is told, so
     * that the new id it sees is not taken for a recreation still to be read from its start.
     */
    @Override
    public Offset mergeOffsets(PartitionOffset[] offsets) {
        Map<TopicPartition, Long> merged = new HashMap<>();
        Set<TopicPartition> fromStart = new HashSet<>();
        for (PartitionOffset offset : offsets) {
            merged.putAll(((StreamPosition) offset).offsets);
            fromStart.addAll(((StreamPosition) offset).readFromStart);
        }
        if (!fromStart.isEmpty()) {
            Positions.DRIVER.readFromStart(fromStart);
        }
        return new SourceOffset(merged);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new StreamReaderFactory();
    }

    @Override
    public Offset deserializeOffset(String json) {
        return SourceOffset.parse(json);
    }

    /**
     * Spark committed the batch that ended at {@code end} (called as the next one is planned): its records are
     * all acknowledged or never needed to be, so positions move there (docs/decisions.md §10).
     */
    @Override
    public synchronized void commit(Offset end) {
        Positions.DRIVER.batchEnded(((SourceOffset) end).offsets, planned);
    }

    @Override
    public void stop() {
        stopped = true;
        KafkaConsumer<byte[], byte[]> consumer = metadata;
        if (consumer != null) {
            consumer.wakeup();
        }
        synchronized (this) {
            if (metadata != null) {
                metadata.close(Duration.ZERO);
                metadata = null;
            }
        }
        StreamConsumers.closeRun(run);
        GroupCommitter.flush();
    }

    @Override
    public String toString() {
        return "mirrord[" + options.pattern.pattern() + ", " + options.streams + " streams]";
    }

    /** The partitions of the topics that match, listed again when {@code topic.refresh.ms} has passed. */
    private Set<TopicPartition> partitions(boolean now) {
        long at = System.currentTimeMillis();
        if (listed == null || now || at - listedAt >= options.refreshMs) {
            listed = matching(ask(() -> metadata().listTopics(ASK_TIMEOUT)).values(), options);
            listedAt = at;
        }
        return listed;
    }

    /** Those of {@code partitions} that still exist, as last listed: a question about a deleted one would wait. */
    private Set<TopicPartition> existing(Set<TopicPartition> partitions) {
        Set<TopicPartition> existing = new HashSet<>(partitions);
        existing.retainAll(partitions(false));
        return existing;
    }

    static Set<TopicPartition> matching(Collection<List<PartitionInfo>> topics, SourceOptions options) {
        Set<TopicPartition> partitions = new HashSet<>();
        for (List<PartitionInfo> infos : topics) {
            for (PartitionInfo info : infos) {
                if (options.matches(info.topic())) {
                    partitions.add(new TopicPartition(info.topic(), info.partition()));
                }
            }
        }
        return partitions;
    }

    private KafkaConsumer<byte[], byte[]> metadata() {
        if (metadata == null) {
            metadata = new KafkaConsumer<>(options.consumerConfig("source-metadata"));
        }
        return metadata;
    }

    /**
     * Asks the source until it answers: an unreachable source is waited for, not a failed query. A question
     * not answered in time lists the topics again before it is asked again (it may name a deleted topic).
     */
    private <T> T ask(Supplier<T> question) {
        long since = System.currentTimeMillis();
        long warned = since;
        while (true) {
            try {
                return question.get();
            } catch (TimeoutException e) {
                if (stopped || Thread.currentThread().isInterrupted()) {
                    throw e;
                }
                listed = null;
                long now = System.currentTimeMillis();
                if (now - warned >= 60_000) {
                    warned = now;
                    log.warn("the source cluster has not answered for {} s; asking again", (now - since) / 1000);
                }
            } catch (WakeupException e) {
                throw new IllegalStateException("mirrord's source was stopped", e);
            }
        }
    }
}
