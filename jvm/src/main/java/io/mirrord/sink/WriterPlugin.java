package io.mirrord.sink;

import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * {@code spark.plugins=io.mirrord.sink.WriterPlugin,io.mirrord.metrics.MirrordPlugin}: when an executor stops, the
 * streams' senders it keeps are closed ({@link MirrorWriter#closeAll}): what they buffered is delivered and their
 * delayed offset syncs written. Spark stops an executor's plugins in the order {@code spark.plugins} lists them, so
 * the metrics plugin's last shipment, after this, has the last counts and positions in it. A plugin of the sink's
 * own, so that the metrics do not depend on the sink.
 */
public final class WriterPlugin implements SparkPlugin {
    @Override
    public DriverPlugin driverPlugin() {
        return null;
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new ExecutorPlugin() {
            @Override
            public void shutdown() {
                MirrorWriter.closeAll();
            }
        };
    }
}
