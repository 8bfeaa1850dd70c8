package io.mirrord.positions;

import io.mirrord.fencing.Fence;
import io.mirrord.metrics.WarnLimiter;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Commits {@link Positions#DRIVER} to the flow's consumer group on the source from the JVM itself, every
 * {@link #EVERY_MS} ms, so a supervisor that stopped answering leaves the group at most that far behind
 * what the target holds; and asks the source for its topics' ids every {@link #IDS_EVERY_MS} ms. Only while
 * this host may send ({@link Fence#open()}): a fenced host's positions are not the group's truth.
 */
public final class GroupCommitter {
    public static final long EVERY_MS = 250;
    static final long IDS_EVERY_MS = 2_000;
    private static final Duration TIMEOUT = Duration.ofSeconds(5);
    private static final Logger log = LoggerFactory.getLogger(GroupCommitter.class);
    private static GroupCommitter running;  // guarded by GroupCommitter.class

    private final String group;
    private final Map<String, Object> config;
    private final WarnLimiter warnings = new WarnLimiter(60_000);
    private KafkaConsumer<byte[], byte[]> consumer;  // guarded by this
    private Admin admin;  // guarded by this
    private long idsAt;

    private GroupCommitter(String group, Map<String, Object> config) {
        this.group = group;
        this.config = config;
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

    /** Commits what moved now, from the caller's thread; false when the group could not be reached or fenced. */
    public static boolean flush() {
        GroupCommitter committer;
        synchronized (GroupCommitter.class) {
            committer = running;
        }
        return committer == null || committer.commit();
    }

    private void loop() {
        while (true) {
            synchronized (GroupCommitter.class) {
                if (running != this) {
                    return;
                }
            }
            long now = System.currentTimeMillis();
            if (now - idsAt >= IDS_EVERY_MS) {
                idsAt = now;
                refreshIds();
            }
            commit();
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(EVERY_MS));
        }
    }

    synchronized boolean commit() {
        Map<TopicPartition, OffsetAndMetadata> moved = Positions.DRIVER.uncommitted();
        if (moved.isEmpty()) {
            return true;
        }
        if (!Fence.open()) {
            return false;
        }
        try {
            consumer().commitSync(moved, TIMEOUT);
            Positions.DRIVER.committed(moved);
            return true;
        } catch (RuntimeException e) {
            warn("cannot commit mirrored positions to group " + group, e);
            return false;
        }
    }

    private synchronized void refreshIds() {
        Set<String> topics = Positions.DRIVER.topics();
        if (topics.isEmpty()) {
            return;
        }
        Map<String, String> ids = new HashMap<>();
        Set<String> gone = new HashSet<>();
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
                    log.debug("no id for topic {} now: {}", e.getKey(), failed.toString());
                }
            }
        } catch (RuntimeException e) {
            warn("cannot ask the source for its topics' ids", e);
        }
        Positions.DRIVER.topicIds(ids);
        Positions.DRIVER.deleted(gone, System.currentTimeMillis());
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
        if (admin != null) {
            admin.close(Duration.ZERO);
            admin = null;
        }
    }
}
