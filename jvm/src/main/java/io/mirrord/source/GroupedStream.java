package io.mirrord.source;

import io.mirrord.positions.GroupCommitter;
import io.mirrord.positions.Positions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode;

/**
 * The driver's side of the source: which partitions there are, where each batch starts and (micro-batch
 * mode) ends, and which stream reads what ({@link Assignment}). The source cluster is asked through
 * {@link SourceMetadata}; where a partition starts is {@link BatchStarts}'s to say.
 *
 * <p>Micro-batch mode: a batch reads from the last batch's end to the partitions' log end offsets (at most
 * {@code maxOffsetsPerTrigger} records), one task per stream with something to read. Real-time mode: every
 * stream gets a task for the whole batch, reading from where the last batch ended until the clock ends it,
 * and picking up new partitions on its own; the batch's end offsets are the streams' own positions.
 */
final class GroupedStream implements MicroBatchStream, SupportsRealTimeMode, SupportsAdmissionControl {
    private static final long EARLIEST = -2;
    private static final long LATEST = -1;

    private final SourceOptions options;
    private final String run = UUID.randomUUID().toString();
    private final SourceMetadata metadata;
    private final BatchStarts starts;
    private Map<TopicPartition, Long> latest;
    private Map<TopicPartition, Long> planned = Map.of();  // the last planned batch's incarnations
    private volatile boolean realTime;

    GroupedStream(SourceOptions options) {
        this.options = options;
        this.metadata = new SourceMetadata(options);
        this.starts = new BatchStarts(metadata);
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
        Set<TopicPartition> partitions = metadata.partitions(true);
        BatchStarts.askIds(partitions);
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
            start.putAll(metadata.beginningOffsets(earliest));
        }
        if (!atEnd.isEmpty()) {
            start.putAll(metadata.endOffsets(atEnd));
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
        BatchStarts.askIds(start.offsets.keySet());
        Map<TopicPartition, Long> ends = metadata.endOffsets();
        latest = ends;
        Map<TopicPartition, Long> from = starts.of(start.offsets, ends);
        if (limit instanceof ReadMaxRows max) {
            return new SourceOffset(BatchStarts.capped(from, ends, max.maxRows()));
        }
        return new SourceOffset(ends);
    }

    @Override
    public synchronized Offset reportLatestOffset() {
        return latest == null ? null : new SourceOffset(latest);
    }

    @Override
    public synchronized InputPartition[] planInputPartitions(Offset startOffset, Offset endOffset) {
        Map<TopicPartition, Long> ends = ((SourceOffset) endOffset).offsets;
        Map<TopicPartition, Long> from = starts.of(((SourceOffset) startOffset).offsets, ends);
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
        starts.planned();
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
        BatchStarts.askIds(((SourceOffset) startOffset).offsets.keySet());
        Map<TopicPartition, Long> from = starts.realTime(((SourceOffset) startOffset).offsets);
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

    private List<Map<TopicPartition, Long>> groups() {
        List<Map<TopicPartition, Long>> groups = new ArrayList<>();
        for (int i = 0; i < options.streams; i++) {
            groups.add(new HashMap<>());
        }
        return groups;
    }

    /**
     * The real-time batch's end: where its streams stand. Partitions a stream found recreated under it and read
     * again from their start (or found new) are in the topic's new incarnation already: the owner is told, with the
     * id each topic had before the stream read it ({@link FromStart}), so that this id is not taken for a recreation
     * still to be read from its start. A topic the source names by another id now was recreated under the reading and
     * refilled past where the stream read to (it read on at the old offsets): the next batch reads it again from its
     * start (docs/decisions.md §10).
     */
    @Override
    public Offset mergeOffsets(PartitionOffset[] offsets) {
        Map<TopicPartition, Long> merged = new HashMap<>();
        Set<TopicPartition> fromStart = new HashSet<>();
        Map<String, String> readIds = new HashMap<>();
        for (PartitionOffset offset : offsets) {
            merged.putAll(((StreamPosition) offset).offsets);
            fromStart.addAll(((StreamPosition) offset).readFromStart);
            readIds.putAll(((StreamPosition) offset).ids);
        }
        if (!fromStart.isEmpty()) {
            Positions.DRIVER.readFromStart(fromStart, readIds);  // without an id (a cluster): the owner's next is theirs
            Set<String> topics = new HashSet<>();
            fromStart.forEach(tp -> topics.add(tp.topic()));
            Positions.DRIVER.topicIds(GroupCommitter.topicIdsNow(topics));  // changed since read: read again
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
        metadata.stop();
        StreamConsumers.closeRun(run);
        GroupCommitter.flush();
    }

    @Override
    public String toString() {
        return "mirrord[" + options.pattern.pattern() + ", " + options.streams + " streams]";
    }
}
