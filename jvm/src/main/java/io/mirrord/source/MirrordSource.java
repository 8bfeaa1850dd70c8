package io.mirrord.source;

import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.readStream.format("mirrord")}: the source cluster's topics that match a pattern, read by
 * {@code num.streams} streams, each one Kafka consumer polling a group of partitions, as MirrorMaker 1's
 * streams and MirrorMaker 2's tasks do (Spark's own Kafka source gives every partition a task and a consumer
 * of its own). Rows have the columns of Spark's Kafka source with headers ({@link Rows#SCHEMA}); offsets are
 * Spark's Kafka source's JSON, so a checkpoint it wrote resumes here. Micro-batch and real-time mode.
 */
public final class MirrordSource implements TableProvider, DataSourceRegister {
    /** The streams' consumers waiting in this JVM for their next batch: one per stream that ran here. */
    public static int keptConsumers() {
        return StreamConsumers.idle();
    }

    @Override
    public String shortName() {
        return "mirrord";
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return Rows.SCHEMA;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new SourceTable();
    }

    static final class SourceTable implements Table, SupportsRead {
        @Override
        public String name() {
            return "mirrord";
        }

        @Override
        @SuppressWarnings("deprecation")
        public StructType schema() {
            return Rows.SCHEMA;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return Set.of(TableCapability.MICRO_BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            SourceOptions parsed = SourceOptions.parse(options.asCaseSensitiveMap());
            return () -> new Scan() {
                @Override
                public StructType readSchema() {
                    return Rows.SCHEMA;
                }

                @Override
                public String description() {
                    return "mirrord[" + parsed.pattern.pattern() + ", " + parsed.streams + " streams]";
                }

                @Override
                public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
                    return new GroupedStream(parsed);
                }
            };
        }
    }
}
