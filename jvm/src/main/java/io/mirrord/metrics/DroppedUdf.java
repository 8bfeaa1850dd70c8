package io.mirrord.metrics;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * {@code mirrord_dropped(transform, topic)}: always false, and counts one record of {@code topic} dropped
 * by {@code transform} into {@link Stats#EXECUTOR}, from where {@link MirrordPlugin} brings it to the
 * driver. A transform's filter reads {@code CASE WHEN <kept> THEN true ELSE mirrord_dropped(...) END},
 * so the count is taken where the record is dropped, in the JVM, and only for dropped records.
 *
 * <p>Registered as non-deterministic ({@link #register}), so that Spark's optimizer neither folds nor
 * moves nor evaluates it twice.
 */
public final class DroppedUdf implements UDF2<String, String, Boolean> {
    public static final String NAME = "mirrord_dropped";
    private static final long serialVersionUID = 1L;

    /** From Python: {@code spark._jvm.io.mirrord.metrics.DroppedUdf.register(spark._jsparkSession)}. */
    public static void register(SparkSession spark) {
        spark.udf().register(NAME, functions.udf(new DroppedUdf(), DataTypes.BooleanType).asNondeterministic());
    }

    @Override
    public Boolean call(String transform, String topic) {
        Stats.EXECUTOR.addFiltered(transform, topic);
        return Boolean.FALSE;
    }
}
