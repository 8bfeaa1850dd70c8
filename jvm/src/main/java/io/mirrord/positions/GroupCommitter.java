package io.mirrord.positions;

import io.mirrord.fencing.Fence;
import io.mirrord.log.HoldPoint;
import io.mirrord.log.WarnLimiter;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Commits {@link Positions#DRIVER} to the flow's consumer group on the source from the JVM itself, every
 * {@link #EVERY_MS} ms, so a supervisor that stopped answering leaves the group at most that far behind
 * what the target holds; and asks the source for its topics' ids every {@link #IDS_EVERY_MS} ms. Only while
 * this host may send ({@link Fence#open()}): a fenced host's positions are not the group's truth.
 *
 * <p>What moved is committed at each tick, and every known position, moved or not, at the first and then
 * at least once per half of the source brokers' {@code offsets.retention.minutes} (read once at start; an
 * hour if it cannot be read): the group's offset of a partition idle for longer would expire, and a restart
 * or take-over would then start it from {@code auto.offset.reset} (docs/decisions.md §10).
 */
public final class GroupCommitter {
    public static final long EVERY_MS = 250;
    static final long IDS_EVERY_MS = 2_000;
    static final String RETENTION = "offsets.retention.minutes";
    static final long ROUND_FALLBACK_MS = 3_600_000;
    private static final Duration TIMEOUT = Duration.ofSeconds(5);
    private static final Logger log = LoggerFactory.getLogger(GroupCommitter.class);
    private static GroupCommitter running;  // guarded by GroupCommitter.class

    private final String group;
    private final Map<String, Object> config;
    private final Positions positions;
    private final LongSupplier clock;
    private final Commits commits;
    private final WarnLimiter warnings = new WarnLimiter(60_000);
    private KafkaConsumer<byte[], byte[]> consumer;  // guarded by this
    private final Object adminLock = new Object();  // the admin client's: asking ids never waits behind a commit
    private Admin admin;  // guarded by adminLock
    private long idsAt;
    private volatile long roundEveryMs;
    private long roundAt = Long.MIN_VALUE;  // when every position is due again; guarded by this

    /** Where commits go: the group on the source; a test's list. */
    interface Commits {
        void commit(Map<TopicPartition, OffsetAndMetadata> offsets);
    }

    private GroupCommitter(String group, Map<String, Object> config) {
        this.group = group;
        this.config = config;
        this.positions = Positions.DRIVER;
        this.clock = System::currentTimeMillis;
        this.commits = offsets -> consumer().commitSync(offsets, TIMEOUT);
        this.roundEveryMs = ROUND_FALLBACK_MS;
    }

    /** For tests: {@code positions} committed to {@code commits} by {@code clock}, no thread, no cluster. */
    GroupCommitter(Positions positions, LongSupplier clock, Commits commits, long roundEveryMs) {
        this.group = "test";
        this.config = Map.of();
        this.positions = positions;
        this.clock = clock;
        this.commits = commits;
        this.roundEveryMs = roundEveryMs;
    }

    /**
     * Commits to {@code group} from now on, with the source consumer's properties {@code config}; a second call
     * for the same group keeps the running committer.
     */
    public static synchronized void start(String group, Map<String, Object> config) {
        if (running != null && running.group.equals(group)) {
            return;
        }
        if (running != null) {
            running.close();
        }
        GroupCommitter committer = new GroupCommitter(group, config);
        running = committer;
        Thread thread = new Thread(() -> committer.loop(), "mirrord-positions");
        thread.setDaemon(true);
        thread.start();
    }

    /**
     * Commits what moved (every position, when due) now, from the caller's thread; false when the group could
     * not be reached or fenced.
     */
    public static boolean flush() {
        GroupCommitter committer;
        synchronized (GroupCommitter.class) {
            committer = running;
        }
        return committer == null || committer.commit();
    }

    private void loop() {
        roundEveryMs = askRoundEveryMs();
        while (true) {
            synchronized (GroupCommitter.class) {
                if (running != this) {
                    return;
                }
            }
            long now = clock.getAsLong();
            if (now - idsAt >= IDS_EVERY_MS || positions.takeIdsWanted()) {  // after a read from start: at once
                idsAt = now;
                if (!positions.topics().isEmpty()) {
                    HoldPoint.reach("ids");
                }
                refreshIds();
            }
            commit();
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(EVERY_MS));
        }
    }

    synchronized boolean commit() {
        long now = clock.getAsLong();
        boolean round = now >= roundAt;
        Map<TopicPartition, OffsetAndMetadata> due = round ? positions.known() : positions.uncommitted();
        if (due.isEmpty()) {
            return true;
        }
        if (!Fence.open()) {
            return false;
        }
        try {
            commits.commit(due);
            positions.committed(due);
            if (round) {
                roundAt = now + roundEveryMs;
            }
            return true;
        } catch (RuntimeException e) {
            warn("cannot commit mirrored positions to group " + group, e);
            return false;
        }
    }

    /** Half the retention a source broker gives a group's offsets; {@link #ROUND_FALLBACK_MS} if it cannot say. */
    private synchronized long askRoundEveryMs() {
        String minutes = null;
        try {
            Collection<Node> brokers = admin().describeCluster().nodes().get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, brokers.iterator().next().idString());
            ConfigEntry entry = admin().describeConfigs(List.of(broker)).all()
                    .get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS).get(broker).get(RETENTION);
            minutes = entry == null ? null : entry.value();
        } catch (ExecutionException | TimeoutException | RuntimeException e) {
            log.warn("cannot read {} from the source ({}): every position is committed to group {} every hour",
                    RETENTION, e instanceof ExecutionException ? e.getCause() : e, group);
            return ROUND_FALLBACK_MS;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return ROUND_FALLBACK_MS;
        }
        long every = roundEveryMs(minutes);
        log.info("every position is committed to group {} at least every {} min (the source's {}: {})", group,
                every / 60_000, RETENTION, minutes);
        return every;
    }

    /** Half of {@code minutes} ({@value #RETENTION}), in ms; {@link #ROUND_FALLBACK_MS} if it is no positive number. */
    static long roundEveryMs(String minutes) {
        try {
            long parsed = minutes == null ? 0 : Long.parseLong(minutes.trim());
            return parsed > 0 ? parsed * 60_000 / 2 : ROUND_FALLBACK_MS;
        } catch (NumberFormatException e) {
            return ROUND_FALLBACK_MS;
        }
    }

    private synchronized void refreshIds() {
        Set<String> topics = positions.topics();
        if (topics.isEmpty()) {
            return;
        }
        Set<String> gone = new HashSet<>();
        positions.topicIds(describe(topics, gone));
        positions.deleted(gone, System.currentTimeMillis());
    }

    /**
     * The ids of those of {@code topics} the source names now, asked on the running committer's admin client, from
     * the caller's thread; empty when no committer runs or the source does not answer (within 5 s a topic). A batch
     * that reads partitions from their start asks before their first offsets (docs/decisions.md §10).
     */
    public static Map<String, String> topicIdsNow(Collection<String> topics) {
        GroupCommitter committer;
        synchronized (GroupCommitter.class) {
            committer = running;
        }
        if (committer == null || topics.isEmpty()) {
            return Map.of();
        }
        return committer.describe(topics, new HashSet<>());
    }

    /** The ids of {@code topics}; those the source says do not exist are added to {@code gone}. */
    private Map<String, String> describe(Collection<String> topics, Set<String> gone) {
        Map<String, String> ids = new HashMap<>();
        try {
            Map<String, KafkaFuture<TopicDescription>> found = admin().describeTopics(TopicCollection.ofTopicNames(topics))
                    .topicNameValues();
            for (Map.Entry<String, KafkaFuture<TopicDescription>> e : found.entrySet()) {
                try {
                    ids.put(e.getKey(), e.getValue().get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS).topicId().toString());
                } catch (ExecutionException failed) {
                    if (failed.getCause() instanceof UnknownTopicOrPartitionException) {
                        gone.add(e.getKey());  // deleted: nothing of it is committed any more
                    }
                } catch (InterruptedException | TimeoutException failed) {
                    if (failed instanceof InterruptedException) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                    log.debug("no id for topic {} now: {}", e.getKey(), failed.toString());
                }
            }
        } catch (RuntimeException e) {
            warn("cannot ask the source for its topics' ids", e);
        }
        return ids;
    }

    private KafkaConsumer<byte[], byte[]> consumer() {
        if (consumer == null) {
            Map<String, Object> c = new HashMap<>(config);
            c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            c.put(ConsumerConfig.CLIENT_ID_CONFIG, c.getOrDefault(ConsumerConfig.CLIENT_ID_CONFIG, "mirrord") + "-positions");
            c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            consumer = new KafkaConsumer<>(c);
        }
        return consumer;
    }

    private Admin admin() {
        synchronized (adminLock) {
            if (admin == null) {
                Map<String, Object> c = new HashMap<>();
                config.forEach((k, v) -> {
                    if (AdminClientConfig.configNames().contains(k)) {
                        c.put(k, v);
                    }
                });
                c.put("client.id", config.getOrDefault(ConsumerConfig.CLIENT_ID_CONFIG, "mirrord") + "-topic-ids");
                admin = Admin.create(c);
            }
            return admin;
        }
    }

    private void warn(String what, RuntimeException e) {
        long dropped = warnings.admit();
        if (dropped >= 0) {
            log.warn("{}{}: {}", what, dropped > 0 ? " (and " + dropped + " more times since)" : "", e.toString());
        }
    }

    private synchronized void close() {
        if (consumer != null) {
            consumer.close(Duration.ZERO);
            consumer = null;
        }
        synchronized (adminLock) {
            if (admin != null) {
                admin.close(Duration.ZERO);
                admin = null;
            }
        }
    }
}
