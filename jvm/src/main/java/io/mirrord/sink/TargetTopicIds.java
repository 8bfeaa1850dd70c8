package io.mirrord.sink;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsResult;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The ids of the target topics that offset syncs point into, so that each sync names the incarnation of the
 * target topic its target offsets belong to (header {@value #HEADER}; docs/decisions.md §7): a reader ignores
 * the syncs of a target topic deleted and recreated since. Asked of the target by a thread of its own, every
 * {@value #REFRESH_MS} ms and at once for a topic not seen before, never on a record's path. While a topic is
 * gone its last id stays (its syncs are stale either way); when a topic shows a new id, {@code onRecreated}
 * is told its source topic, so that the writer forgets the runs it holds of the old one; when a topic's first id
 * comes, {@code onLearned} is, so that the writer shows its runs again naming it (the syncs it wrote before named
 * the incarnation as unknown). The thread and the Admin are this object's, released by {@link #close()}.
 */
final class TargetTopicIds implements AutoCloseable {
    static final String HEADER = "mirrord.target.topic.id";
    static final long REFRESH_MS = 10_000;
    private static final long TIMEOUT_MS = 5_000;
    private static final String UNKNOWN = "";
    private static final Logger log = LoggerFactory.getLogger(TargetTopicIds.class);

    private final Map<String, Object> adminConfig = new HashMap<>();
    private final String prefix;
    private final Consumer<String> onRecreated;
    private final Consumer<String> onLearned;
    private final Map<String, String> ids = new ConcurrentHashMap<>();  // by source topic; UNKNOWN until seen
    private final ScheduledExecutorService refresher;  // null: fed by seen() alone (OffsetSyncReplay, tests)
    private Admin admin;  // the refresher's

    /**
     * {@code clientConfig}: the target's client properties (those an Admin does not take are left out); null:
     * no thread and no Admin, the ids told by {@link #seen} alone.
     */
    TargetTopicIds(Map<String, ?> clientConfig, String prefix, Consumer<String> onRecreated,
                   Consumer<String> onLearned) {
        this.prefix = prefix == null ? "" : prefix;
        this.onRecreated = onRecreated;
        this.onLearned = onLearned;
        if (clientConfig == null) {
            refresher = null;
            return;
        }
        clientConfig.forEach((key, value) -> {
            if (AdminClientConfig.configNames().contains(key)) {
                adminConfig.put(key, value);
            }
        });
        adminConfig.put(AdminClientConfig.CLIENT_ID_CONFIG, "mirrord-target-topic-ids");
        refresher = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "mirrord-target-topic-ids");
            t.setDaemon(true);
            return t;
        });
        refresher.scheduleWithFixedDelay(this::refresh, REFRESH_MS, REFRESH_MS, TimeUnit.MILLISECONDS);
    }

    /** The id of the target topic of {@code sourceTopic} as last seen, or null (asked for at once). */
    String of(String sourceTopic) {
        String id = ids.putIfAbsent(sourceTopic, UNKNOWN);
        if (id == null) {
            askSoon();
        }
        return id == null || id.isEmpty() ? null : id;
    }

    /** Asks the target for every topic's id now, on the refresher's thread (a topic may have been recreated). */
    void askSoon() {
        if (refresher != null) {
            try {
                refresher.execute(this::refresh);
            } catch (RejectedExecutionException closed) {
                // closed: nothing more to ask
            }
        }
    }

    /** Asks the target for every topic's id (the refresher's thread; tests call it directly). */
    void refresh() {
        try {
            if (admin == null) {
                admin = Admin.create(adminConfig);
            }
            List<String> sources = List.copyOf(ids.keySet());
            DescribeTopicsResult described = admin.describeTopics(sources.stream().map(s -> prefix + s).toList(),
                    new DescribeTopicsOptions().timeoutMs((int) TIMEOUT_MS));
            Map<String, KafkaFuture<org.apache.kafka.clients.admin.TopicDescription>> byName =
                    described.topicNameValues();
            for (String source : sources) {
                try {
                    seen(source, byName.get(prefix + source).get(TIMEOUT_MS, TimeUnit.MILLISECONDS).topicId().toString());
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                        log.debug("cannot describe target topic {}{}: {}", prefix, source, e.getCause().toString());
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (TimeoutException | RuntimeException e) {
            log.debug("cannot describe the target topics: {}", e.toString());
        }
    }

    /**
     * The target topic of {@code source} has the id {@code id} now; the writer hears of a new one before it is in
     * place, and of the first one after.
     */
    void seen(String source, String id) {
        String before = ids.get(source);
        boolean known = before != null && !before.isEmpty();
        if (known && !before.equals(id)) {
            log.warn("target topic {}{} was recreated (topic id {} -> {}): its earlier offset syncs no longer count",
                    prefix, source, before, id);
            onRecreated.accept(source);  // still under the old id: what it emits now is of the old topic
        }
        ids.put(source, id);
        if (!known) {
            onLearned.accept(source);
        }
    }

    @Override
    public void close() {
        if (refresher == null) {
            return;
        }
        refresher.shutdownNow();
        try {
            refresher.awaitTermination(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (admin != null) {
            admin.close(Duration.ofSeconds(1));
        }
    }
}
