package io.mirrord.metrics;

import io.mirrord.log.JsonText;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.LongAdder;

/**
 * What the writers count: records and bytes per target topic, a replication-latency histogram,
 * offset syncs written and failed, exactly once's transactions (how long each lasted and its commit took); and
 * what the transforms drop, per transform and source topic
 * ({@link DroppedUdf}). Executors count into {@link #EXECUTOR} (a stream's writer per source partition into
 * a {@link Tally}, which {@link #drain()} collects); {@link MirrordPlugin} moves those counts to the
 * driver with {@link #drain()} and {@link #add(Delta)}.
 */
public final class Stats {
    /** A latency not known (a record without a timestamp). */
    public static final long NO_LATENCY = Long.MIN_VALUE;
    /** Why records were lost ({@link #addLost}), as the supervisor's line names it. */
    public static final String TOPIC_DELETED = "its topic deleted";
    public static final String RECORDS_DELETED = "retention or delete-records";

    /** What the writers in this JVM count into (declared after the bounds it needs to be built). */
    public static final Stats EXECUTOR = new Stats();

    final Map<String, Topic> topics = new ConcurrentHashMap<>();
    final Histogram latency = new Histogram();
    final Histogram transactionTimes = new Histogram();  // exactly once: a committed transaction's begin to its end
    final Histogram commitTimes = new Histogram();  // exactly once: a commit's flush and the coordinator's answer
    final LongAdder syncs = new LongAdder();
    final LongAdder syncErrors = new LongAdder();
    final LongAdder transactions = new LongAdder();  // exactly once: committed
    final LongAdder aborted = new LongAdder();  // exactly once: aborted
    final Map<String, Map<String, LongAdder>> filtered = new ConcurrentHashMap<>();  // transform → topic
    final Map<String, Map<Integer, AckedPosition>> positions = new ConcurrentHashMap<>();  // source topic → partition
    private final Set<Tally> tallies = ConcurrentHashMap.newKeySet();
    private final ConcurrentLinkedQueue<Lost> lost = new ConcurrentLinkedQueue<>();  // until the supervisor takes them

    public void addBytes(String topic, long bytes) {
        topic(topic).bytes.add(bytes);
    }

    public void addRecord(String topic) {
        topic(topic).records.increment();
    }

    public void observeLatencyMs(long latencyMs) {
        latency.observeMs(latencyMs);
    }

    public void addSync() {
        syncs.increment();
    }

    /** Exactly once: a transaction committed, {@code lastedMs} after it began, its commit taking {@code commitMs}. */
    public void transactionCommitted(long lastedMs, long commitMs) {
        transactions.increment();
        transactionTimes.observeMs(lastedMs);
        commitTimes.observeMs(commitMs);
    }

    /** Exactly once: a transaction aborted. */
    public void transactionAborted() {
        aborted.increment();
    }

    public void addSyncError() {
        syncErrors.increment();
    }

    /** The acknowledged position of a source partition, made on first use; the writer keeps the reference. */
    AckedPosition position(String topic, int partition) {
        Map<Integer, AckedPosition> partitions = positions.get(topic);
        if (partitions == null) {
            partitions = positions.computeIfAbsent(topic, t -> new ConcurrentHashMap<>());
        }
        AckedPosition position = partitions.get(partition);
        return position != null ? position : partitions.computeIfAbsent(partition, p -> new AckedPosition());
    }

    /**
     * A tally of one target partition's records, counted into this Stats at each {@link #drain()}: the
     * writer's per-record counting, free of shared counters.
     */
    public Tally tally(String targetTopic, String sourceTopic, int partition) {
        Tally tally = new Tally(topic(targetTopic), position(sourceTopic, partition), latency);
        tallies.add(tally);
        return tally;
    }

    private void countTallies() {
        for (Tally tally : tallies) {
            tally.moveOut();
        }
    }

    /** Counts what {@code tally} holds and forgets it (its writer closed). */
    public void release(Tally tally) {
        tally.moveOut();
        tallies.remove(tally);
    }

    /** A record of source {@code topic} dropped by {@code transform}'s filter or sample. */
    public void addFiltered(String transform, String topic) {
        filteredCounter(transform, topic).increment();
    }

    private LongAdder filteredCounter(String transform, String topic) {
        Map<String, LongAdder> topics = filtered.get(transform);
        if (topics == null) {
            topics = filtered.computeIfAbsent(transform, t -> new ConcurrentHashMap<>());
        }
        LongAdder count = topics.get(topic);
        return count != null ? count : topics.computeIfAbsent(topic, t -> new LongAdder());
    }

    /**
     * Source records {@code [from, to)} of a partition that a stream knew of and never read, and why: its topic was
     * deleted ({@link #TOPIC_DELETED}), or they were ({@link #RECORDS_DELETED}: retention, delete-records).
     */
    public void addLost(String topic, int partition, long from, long to, String why) {
        lost.add(new Lost(topic, partition, from, to, why));
    }

    /**
     * The ranges lost since the last call, {@code [["topic",partition,from,to,"why"],...]}, for the supervisor to
     * count.
     */
    public String takeLostJson() {
        StringBuilder json = new StringBuilder("[");
        for (Lost range; (range = lost.poll()) != null; ) {
            JsonText.appendString(json.append(json.length() > 1 ? ",[" : "["), range.topic());
            json.append(',').append(range.partition()).append(',').append(range.from()).append(',').append(range.to());
            JsonText.appendString(json.append(','), range.why());
            json.append(']');
        }
        return json.append(']').toString();
    }

    /** Moves every count into the returned delta; counts added meanwhile stay here, none is lost. */
    public Delta drain() {
        countTallies();
        Delta delta = new Delta();
        topics.forEach((name, t) -> {
            long records = take(t.records);
            long bytes = take(t.bytes);
            if (records != 0 || bytes != 0) {
                delta.topics.put(name, new long[] {records, bytes});
            }
        });
        delta.latency = latency.drain();
        delta.transactionTimes = transactionTimes.drain();
        delta.commitTimes = commitTimes.drain();
        delta.syncs = take(syncs);
        delta.syncErrors = take(syncErrors);
        delta.transactions = take(transactions);
        delta.aborted = take(aborted);
        for (Lost range; (range = lost.poll()) != null; ) {
            delta.lost.add(range);
        }
        filtered.forEach((transform, topics) -> topics.forEach((topic, count) -> {
            long n = take(count);
            if (n != 0) {
                delta.filtered.computeIfAbsent(transform, t -> new HashMap<>()).put(topic, n);
            }
        }));
        positions.forEach((topic, partitions) -> partitions.forEach((partition, position) -> {
            long[] moved = position.takeNew();
            if (moved != null) {
                delta.positions.computeIfAbsent(topic, t -> new HashMap<>()).put(partition, moved);
            }
        }));
        return delta;
    }

    public void add(Delta delta) {
        delta.topics.forEach((name, counts) -> {
            Topic t = topic(name);
            t.records.add(counts[0]);
            t.bytes.add(counts[1]);
        });
        latency.add(delta.latency.counts, delta.latency.sumMs);
        transactionTimes.add(delta.transactionTimes.counts, delta.transactionTimes.sumMs);
        commitTimes.add(delta.commitTimes.counts, delta.commitTimes.sumMs);
        syncs.add(delta.syncs);
        syncErrors.add(delta.syncErrors);
        transactions.add(delta.transactions);
        aborted.add(delta.aborted);
        lost.addAll(delta.lost);
        delta.filtered.forEach((transform, topics) -> topics.forEach(
                (topic, n) -> filteredCounter(transform, topic).add(n)));
        delta.positions.forEach((topic, partitions) -> partitions.forEach(
                (partition, moved) -> position(topic, partition).advance(moved[0], moved[1])));
    }

    /**
     * The counts so far, as JSON ({@link StatsJson}): for the supervisor, tests and diagnostics; the positions that
     * count are their owner's, {@link io.mirrord.positions.Positions}.
     */
    public String toJson() {
        countTallies();
        return StatsJson.of(this);
    }

    /** Counts moved out of one {@link Stats} by {@link #drain()}, to be added to another. */
    public static final class Delta implements Serializable {
        private static final long serialVersionUID = 1L;
        final HashMap<String, long[]> topics = new HashMap<>();  // topic → {records, bytes}
        Histogram.Moved latency = new Histogram.Moved();
        Histogram.Moved transactionTimes = new Histogram.Moved();
        Histogram.Moved commitTimes = new Histogram.Moved();
        long syncs;
        long syncErrors;
        long transactions;
        long aborted;
        final HashMap<String, HashMap<String, Long>> filtered = new HashMap<>();  // transform → topic → records
        public final HashMap<String, HashMap<Integer, long[]>> positions = new HashMap<>();  // source topic → partition → {incarnation, next}
        final ArrayList<Lost> lost = new ArrayList<>();

        public boolean isEmpty() {
            return topics.isEmpty() && latency.isEmpty() && transactionTimes.isEmpty() && commitTimes.isEmpty()
                    && syncs == 0 && syncErrors == 0 && transactions == 0 && aborted == 0 && filtered.isEmpty()
                    && positions.isEmpty() && lost.isEmpty();
        }
    }

    /** Source records {@code [from, to)} of one partition, never read, and why (see {@link #addLost}). */
    record Lost(String topic, int partition, long from, long to, String why) implements Serializable {
    }

    /** One topic's counters; the writer keeps a reference per partition instead of a lookup per record. */
    static final class Topic {
        final LongAdder records = new LongAdder();
        final LongAdder bytes = new LongAdder();
    }

    Topic topic(String name) {
        Topic t = topics.get(name);
        return t != null ? t : topics.computeIfAbsent(name, n -> new Topic());
    }

    private static long take(LongAdder adder) {
        return Histogram.take(adder);
    }
}
