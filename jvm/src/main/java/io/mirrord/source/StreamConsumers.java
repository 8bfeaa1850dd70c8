package io.mirrord.source;

import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Predicate;

/**
 * The streams' consumers that wait in this JVM between two batches of their query's run, one per stream:
 * a batch boundary neither closes nor re-creates a consumer, and what it fetched ahead is kept. A consumer
 * left idle longer than {@link #IDLE_MS} (its run stopped on another executor, or its stream moved) is
 * closed.
 */
final class StreamConsumers {
    static final long IDLE_MS = 10 * 60_000;
    private static final Map<String, StreamConsumer> IDLE = new ConcurrentHashMap<>();

    private StreamConsumers() {
    }

    static StreamConsumer borrow(StreamSplit split) {
        closeIdle(System.currentTimeMillis() - IDLE_MS);
        StreamConsumer kept = IDLE.remove(key(split.run, split.stream));
        return kept != null ? kept : new StreamConsumer(split.options, split.run, split.stream);
    }

    static void giveBack(StreamConsumer consumer) {
        consumer.idleSince = System.currentTimeMillis();
        StreamConsumer replaced = IDLE.put(key(consumer.run, consumer.stream), consumer);
        if (replaced != null && replaced != consumer) {
            replaced.close();
        }
    }

    /** The run's query stopped: its consumers here are closed. */
    static void closeRun(String run) {
        close(consumer -> consumer.run.equals(run));
    }

    static int idle() {
        return IDLE.size();
    }

    private static void closeIdle(long before) {
        close(consumer -> consumer.idleSince < before);
    }

    private static void close(Predicate<StreamConsumer> which) {
        for (Iterator<StreamConsumer> it = IDLE.values().iterator(); it.hasNext(); ) {
            StreamConsumer consumer = it.next();
            if (which.test(consumer)) {
                it.remove();
                consumer.close();
            }
        }
    }

    private static String key(String run, int stream) {
        return run + "/" + stream;
    }
}
