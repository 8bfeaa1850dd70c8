package io.mirrord.metrics;

import io.mirrord.sink.DroppedUdf;

import java.io.Serializable;
import java.math.BigDecimal;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * What the writers count: records and bytes per target topic, a replication-latency histogram,
 * offset syncs written and failed; and what the transforms drop, per transform and source topic
 * ({@link DroppedUdf}). Executors count into {@link #EXECUTOR} (a stream's writer per source partition into
 * a {@link Tally}, which {@link #drain()} collects); {@link MirrordPlugin} moves those counts to the
 * driver with {@link #drain()} and {@link #add(Delta)}.
 */
public final class Stats {
    /** Histogram bucket upper bounds in seconds (Prometheus {@code le}); a last bucket takes the rest. */
    static final double[] BOUNDS_SECONDS = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600};
    static final int BUCKETS = BOUNDS_SECONDS.length + 1;
    private static final long[] BOUNDS_MS = new long[BOUNDS_SECONDS.length];

    static {
        for (int i = 0; i < BOUNDS_SECONDS.length; i++) {
            BOUNDS_MS[i] = Math.round(BOUNDS_SECONDS[i] * 1000);
        }
    }

    /** A latency not known (a record without a timestamp). */
    public static final long NO_LATENCY = Long.MIN_VALUE;

    /** What the writers in this JVM count into (declared after the bounds it needs to be built). */
    public static final Stats EXECUTOR = new Stats();

    private final Map<String, Topic> topics = new ConcurrentHashMap<>();
    private final LongAdder[] latencyCounts = new LongAdder[BUCKETS];
    private final LongAdder latencySumMs = new LongAdder();
    private final LongAdder syncs = new LongAdder();
    private final LongAdder syncErrors = new LongAdder();
    private final LongAdder transactions = new LongAdder();  // exactly once: committed
    private final LongAdder aborted = new LongAdder();  // exactly once: aborted
    private final Map<String, Map<String, LongAdder>> filtered = new ConcurrentHashMap<>();  // transform → topic
    private final Map<String, Map<Integer, Position>> positions = new ConcurrentHashMap<>();  // source topic → partition
    private final Set<Tally> tallies = ConcurrentHashMap.newKeySet();

    public Stats() {
        for (int i = 0; i < BUCKETS; i++) {
            latencyCounts[i] = new LongAdder();
        }
    }

    public void addBytes(String topic, long bytes) {
        topic(topic).bytes.add(bytes);
    }

    public void addRecord(String topic) {
        topic(topic).records.increment();
    }

    public void observeLatencyMs(long latencyMs) {
        long ms = Math.max(0, latencyMs);
        latencyCounts[bucket(ms)].increment();
        latencySumMs.add(ms);
    }

    public void addSync() {
        syncs.increment();
    }

    /** Exactly once: a transaction committed ({@code true}) or aborted. */
    public void addTransaction(boolean committed) {
        (committed ? transactions : aborted).increment();
    }

    public void addSyncError() {
        syncErrors.increment();
    }

    /** The acknowledged position of a source partition, made on first use; the writer keeps the reference. */
    Position position(String topic, int partition) {
        Map<Integer, Position> partitions = positions.get(topic);
        if (partitions == null) {
            partitions = positions.computeIfAbsent(topic, t -> new ConcurrentHashMap<>());
        }
        Position position = partitions.get(partition);
        return position != null ? position : partitions.computeIfAbsent(partition, p -> new Position());
    }

    /**
     * A tally of one target partition's records, counted into this Stats at each {@link #drain()}: the
     * writer's per-record counting, free of shared counters.
     */
    public Tally tally(String targetTopic, String sourceTopic, int partition) {
        Tally tally = new Tally(topic(targetTopic), position(sourceTopic, partition));
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
        for (int i = 0; i < BUCKETS; i++) {
            delta.latencyCounts[i] = take(latencyCounts[i]);
        }
        delta.latencySumMs = take(latencySumMs);
        delta.syncs = take(syncs);
        delta.syncErrors = take(syncErrors);
        delta.transactions = take(transactions);
        delta.aborted = take(aborted);
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
        for (int i = 0; i < BUCKETS; i++) {
            latencyCounts[i].add(delta.latencyCounts[i]);
        }
        latencySumMs.add(delta.latencySumMs);
        syncs.add(delta.syncs);
        syncErrors.add(delta.syncErrors);
        transactions.add(delta.transactions);
        aborted.add(delta.aborted);
        delta.filtered.forEach((transform, topics) -> topics.forEach(
                (topic, n) -> filteredCounter(transform, topic).add(n)));
        delta.positions.forEach((topic, partitions) -> partitions.forEach(
                (partition, moved) -> position(topic, partition).advance(moved[0], moved[1])));
    }

    /**
     * The counts so far: {@code {"topics":{"t":{"records":3,"bytes":42}},"filtered":{"transform":{"source topic":7}},
     * "latency":{"bounds":[0.005,...,3600],"counts":[16 counts, not cumulative, the last one above 3600 s],
     * "sum":1.234},"syncs":5,"sync_errors":0,"positions":{"source topic":{"0":42}}}}, a position being what this Stats
     * saw acknowledged (in the partition's latest incarnation): for tests and diagnostics; the positions that
     * count are their owner's, {@link io.mirrord.positions.Positions}.
     */
    public String toJson() {
        countTallies();
        StringBuilder json = new StringBuilder(256).append("{\"topics\":{");
        String separator = "";
        for (Map.Entry<String, Topic> e : new TreeMap<>(topics).entrySet()) {
            json.append(separator);
            appendString(json, e.getKey());
            json.append(":{\"records\":").append(e.getValue().records.sum())
                    .append(",\"bytes\":").append(e.getValue().bytes.sum()).append('}');
            separator = ",";
        }
        json.append("},\"filtered\":{");
        separator = "";
        for (Map.Entry<String, Map<String, LongAdder>> t : new TreeMap<>(filtered).entrySet()) {
            json.append(separator);
            appendString(json, t.getKey());
            String inner = ":{";
            for (Map.Entry<String, LongAdder> e : new TreeMap<>(t.getValue()).entrySet()) {
                json.append(inner);
                appendString(json, e.getKey());
                json.append(':').append(e.getValue().sum());
                inner = ",";
            }
            json.append(inner.equals(":{") ? ":{}" : "}");
            separator = ",";
        }
        json.append("},\"latency\":{\"bounds\":[");
        for (int i = 0; i < BOUNDS_SECONDS.length; i++) {
            json.append(i == 0 ? "" : ",").append(BigDecimal.valueOf(BOUNDS_SECONDS[i]).stripTrailingZeros().toPlainString());
        }
        json.append("],\"counts\":[");
        for (int i = 0; i < BUCKETS; i++) {
            json.append(i == 0 ? "" : ",").append(latencyCounts[i].sum());
        }
        json.append("],\"sum\":").append(String.format(Locale.ROOT, "%.3f", latencySumMs.sum() / 1000.0))
                .append("},\"syncs\":").append(syncs.sum())
                .append(",\"sync_errors\":").append(syncErrors.sum())
                .append(",\"transactions\":{\"committed\":").append(transactions.sum())
                .append(",\"aborted\":").append(aborted.sum()).append('}');
        json.append(",\"positions\":{");
        separator = "";
        for (Map.Entry<String, Map<Integer, Position>> t : new TreeMap<>(positions).entrySet()) {
            String inner = ":{";
            for (Map.Entry<Integer, Position> e : new TreeMap<>(t.getValue()).entrySet()) {
                long next = e.getValue().get();
                if (next < 0) {
                    continue;  // nothing acknowledged yet
                }
                if (inner.equals(":{")) {
                    json.append(separator);
                    appendString(json, t.getKey());
                    separator = ",";
                }
                json.append(inner).append('"').append(e.getKey()).append("\":").append(next);
                inner = ",";
            }
            if (!inner.equals(":{")) {
                json.append('}');
            }
        }
        return json.append("}}").toString();
    }

    /** Counts moved out of one {@link Stats} by {@link #drain()}, to be added to another. */
    public static final class Delta implements Serializable {
        private static final long serialVersionUID = 1L;
        final HashMap<String, long[]> topics = new HashMap<>();  // topic → {records, bytes}
        final long[] latencyCounts = new long[BUCKETS];
        long latencySumMs;
        long syncs;
        long syncErrors;
        long transactions;
        long aborted;
        final HashMap<String, HashMap<String, Long>> filtered = new HashMap<>();  // transform → topic → records
        public final HashMap<String, HashMap<Integer, long[]>> positions = new HashMap<>();  // source topic → partition → {incarnation, next}

        public boolean isEmpty() {
            if (!topics.isEmpty() || latencySumMs != 0 || syncs != 0 || syncErrors != 0 || transactions != 0 || aborted != 0
                    || !filtered.isEmpty()
                    || !positions.isEmpty()) {
                return false;
            }
            for (long count : latencyCounts) {
                if (count != 0) {
                    return false;
                }
            }
            return true;
        }
    }

    /** One topic's counters; the writer keeps a reference per partition instead of a lookup per record. */
    static final class Topic {
        final LongAdder records = new LongAdder();
        final LongAdder bytes = new LongAdder();
    }

    /**
     * One target partition's counts, kept by the one stream's writer that writes its records:
     * plain fields under this object's monitor, which the writer holds anyway, moved into the shared counters
     * by {@link #drain()}. Measured: LongAdders and an AtomicLong touched per record by every task thread and the
     * producer's I/O thread were the producer interceptor's largest cost on two cores.
     */
    public final class Tally {
        private final Topic topic;
        private final Position position;
        private long records;  // all guarded by this
        private long bytes;
        private final long[] latencyCounts = new long[BUCKETS];
        private long latencySumMs;
        private long incarnation = Long.MIN_VALUE;
        private long next = -1;

        private Tally(Topic topic, Position position) {
            this.topic = topic;
            this.position = position;
        }

        /** A record of {@code size} bytes (key and value) sent; the caller holds this tally's monitor. */
        public void sent(long size) {
            bytes += size;
        }

        /**
         * A record acknowledged {@code latencyMs} after its timestamp ({@link #NO_LATENCY}: unknown); the caller
         * holds this tally's monitor.
         */
        public void acknowledged(long latencyMs) {
            records++;
            if (latencyMs != NO_LATENCY) {
                long ms = Math.max(0, latencyMs);  // clock skew: counted as 0
                latencyCounts[bucket(ms)]++;
                latencySumMs += ms;
            }
        }

        /**
         * The source partition acknowledged up to {@code offset} (exclusive), read in {@code incarnation}; the
         * caller holds this tally's monitor.
         */
        public void advance(long incarnation, long offset) {
            if (incarnation != this.incarnation) {
                this.incarnation = incarnation;
                next = offset;
            } else {
                next = Math.max(next, offset);
            }
        }

        private synchronized void moveOut() {
            if (records != 0) {
                topic.records.add(records);
                records = 0;
            }
            if (bytes != 0) {
                topic.bytes.add(bytes);
                bytes = 0;
            }
            for (int i = 0; i < BUCKETS; i++) {
                if (latencyCounts[i] != 0) {
                    Stats.this.latencyCounts[i].add(latencyCounts[i]);
                    latencyCounts[i] = 0;
                }
            }
            if (latencySumMs != 0) {
                Stats.this.latencySumMs.add(latencySumMs);
                latencySumMs = 0;
            }
            if (next >= 0) {
                position.advance(incarnation, next);
            }
        }
    }

    /**
     * The source offset after the last record of one source partition the target acknowledged, every record
     * sent before it acknowledged too (-1: none yet), in the partition's incarnation (docs/decisions.md §10):
     * within one it only moves forward, a later one replaces it, an earlier one is ignored.
     */
    static final class Position {
        private long incarnation = Long.MIN_VALUE;  // all guarded by this
        private long next = -1;
        private long shippedIncarnation = Long.MIN_VALUE;
        private long shipped = -1;

        synchronized void advance(long incarnation, long offset) {
            if (incarnation > this.incarnation) {
                this.incarnation = incarnation;
                next = offset;
            } else if (incarnation == this.incarnation && offset > next) {
                next = offset;
            }
        }

        synchronized long get() {
            return next;
        }

        /** {incarnation, next} if it moved since the last call, else null. */
        synchronized long[] takeNew() {
            if (next < 0 || (incarnation == shippedIncarnation && next <= shipped)) {
                return null;
            }
            shippedIncarnation = incarnation;
            shipped = next;
            return new long[] {incarnation, next};
        }
    }

    Topic topic(String name) {
        Topic t = topics.get(name);
        return t != null ? t : topics.computeIfAbsent(name, n -> new Topic());
    }

    private static int bucket(long ms) {
        for (int i = 0; i < BOUNDS_MS.length; i++) {
            if (ms <= BOUNDS_MS[i]) {
                return i;
            }
        }
        return BOUNDS_MS.length;
    }

    private static long take(LongAdder adder) {
        long value = adder.sum();
        adder.add(-value);
        return value;
    }

    private static void appendString(StringBuilder json, String s) {
        json.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> json.append("\\\"");
                case '\\' -> json.append("\\\\");
                case '\n' -> json.append("\\n");
                case '\r' -> json.append("\\r");
                case '\t' -> json.append("\\t");
                default -> {
                    if (c < 0x20) {
                        json.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        json.append(c);
                    }
                }
            }
        }
        json.append('"');
    }
}
