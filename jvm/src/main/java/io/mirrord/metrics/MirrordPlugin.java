package io.mirrord.metrics;

import io.mirrord.log.WarnLimiter;
import io.mirrord.positions.Positions;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code spark.plugins=io.mirrord.metrics.MirrordPlugin}: brings the writers' counts ({@link Stats#EXECUTOR})
 * from every executor to the driver, every {@value #INTERVAL_CONF} ms (default 250), where Python
 * reads them with {@code spark._jvm.io.mirrord.metrics.MirrordPlugin.totalsJson()}.
 *
 * <p>When an executor stops, the counts are shipped one last time; mirrord's writer plugin, listed before this one
 * ({@code io.mirrord.sink.WriterPlugin}), has closed the streams' senders by then, so what they buffered is delivered
 * and in the last counts.
 *
 * <p>In local mode the executor runs in the driver's JVM; the counts are still moved from
 * {@link Stats#EXECUTOR} to a separate driver-side {@link Stats}, so nothing is counted twice.
 */
public final class MirrordPlugin implements SparkPlugin {
    public static final String INTERVAL_CONF = "spark.mirrord.metrics.interval.ms";
    static final long INTERVAL_MS_DEFAULT = 250;  // acknowledged positions reach the group within this and a commit
    private static final Stats TOTALS = new Stats();
    private static final Logger log = LoggerFactory.getLogger(MirrordPlugin.class);

    /**
     * Everything the executors have counted so far: {@link Stats#toJson()}. The executor in this JVM (local
     * mode) is drained first, so that positions acknowledged a moment ago are in (a query being stopped
     * reads its final positions here).
     */
    public static String totalsJson() {
        received(TOTALS, Stats.EXECUTOR.drain());
        return TOTALS.toJson();
    }

    /** Source records the streams knew of and never read since the last call: {@link Stats#takeLostJson()}. */
    public static String lostJson() {
        received(TOTALS, Stats.EXECUTOR.drain());
        return TOTALS.takeLostJson();
    }

    /**
     * Counts that reached the driver: added to {@code totals}, and the acknowledged positions handed to their
     * owner, {@link Positions#DRIVER}.
     */
    static void received(Stats totals, Stats.Delta delta) {
        totals.add(delta);
        delta.positions.forEach((topic, partitions) -> partitions.forEach((partition, moved) ->
                Positions.DRIVER.acknowledged(new TopicPartition(topic, partition), moved[0], moved[1])));
    }

    @Override
    public DriverPlugin driverPlugin() {
        return new Collector(TOTALS);
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new Shipper(Stats.EXECUTOR);
    }

    /** The driver side: adds what the executors send. */
    static final class Collector implements DriverPlugin {
        private final Stats totals;

        Collector(Stats totals) {
            this.totals = totals;
        }

        @Override
        public Object receive(Object message) {
            if (!(message instanceof Stats.Delta delta)) {
                throw new IllegalArgumentException("mirrord plugin got a " + message.getClass().getName());
            }
            received(totals, delta);
            return null;
        }
    }

    /** The executor side: sends what was counted since the last time, periodically and at shutdown. */
    static final class Shipper implements ExecutorPlugin {
        interface Sender {
            void send(Object message) throws Exception;
        }

        private final Stats stats;
        private final WarnLimiter warnings = new WarnLimiter(60_000);
        private Sender sender;
        private ScheduledExecutorService timer;

        Shipper(Stats stats) {
            this.stats = stats;
        }

        @Override
        public void init(PluginContext context, Map<String, String> extraConf) {
            long intervalMs = context.conf().getLong(INTERVAL_CONF, INTERVAL_MS_DEFAULT);
            sender = context::send;
            timer = Executors.newSingleThreadScheduledExecutor(runnable -> {
                Thread thread = new Thread(runnable, "mirrord-metrics");
                thread.setDaemon(true);
                return thread;
            });
            timer.scheduleWithFixedDelay(this::ship, intervalMs, intervalMs, TimeUnit.MILLISECONDS);
        }

        @Override
        public void shutdown() {
            if (timer != null) {
                timer.shutdownNow();
                try {
                    timer.awaitTermination(5, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            if (sender != null) {
                ship();
            }
        }

        /** Drains the counts and sends them; counts that could not be sent go back, for the next time. */
        void ship() {
            Stats.Delta delta = stats.drain();
            if (delta.isEmpty()) {
                return;
            }
            try {
                sender.send(delta);
            } catch (Exception e) {
                stats.add(delta);
                long dropped = warnings.admit();
                if (dropped >= 0) {
                    log.warn("cannot send mirrord's counts to the driver{}: {}",
                            dropped > 0 ? " (and " + dropped + " more times since the last warning)" : "", e.toString());
                }
            }
        }

        /** For tests: ship to {@code sender} instead of the driver. */
        void sendTo(Sender sender) {
            this.sender = sender;
        }
    }
}
