package io.mirrord.source;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A Kafka record as a row with the columns (and types) of Spark's Kafka source with headers.
 *
 * <p>The row holds the record's own key and value arrays, not a copy: Spark puts a projection over every
 * row-based scan (the query's select, transforms included), which reads the columns through the row's getters
 * and writes the one {@code UnsafeRow} the rest of the query sees. An {@code UnsafeRow} made here would be
 * copied again by those getters ({@code UnsafeRow.getBinary} copies), so the bytes would be copied three times
 * where once does. Topic names and header keys are turned into Spark's strings once each, not per record.
 */
final class Rows {
    static final StructType HEADER = new StructType(new StructField[] {
        DataTypes.createStructField("key", DataTypes.StringType, true),
        DataTypes.createStructField("value", DataTypes.BinaryType, true)});
    static final StructType SCHEMA = new StructType(new StructField[] {
        DataTypes.createStructField("key", DataTypes.BinaryType, true),
        DataTypes.createStructField("value", DataTypes.BinaryType, true),
        DataTypes.createStructField("topic", DataTypes.StringType, true),
        DataTypes.createStructField("partition", DataTypes.IntegerType, true),
        DataTypes.createStructField("offset", DataTypes.LongType, true),
        DataTypes.createStructField("timestamp", DataTypes.TimestampType, true),
        DataTypes.createStructField("timestampType", DataTypes.IntegerType, true),
        DataTypes.createStructField("headers", new ArrayType(HEADER, true), true)});
    private static final int KEYS_KEPT = 256;  // distinct header keys remembered; more start the memory afresh

    private final Object[] values = new Object[SCHEMA.size()];
    private final GenericInternalRow row = new GenericInternalRow(values);
    private final Map<String, UTF8String> headerKeys = new HashMap<>();
    private UTF8String topicName;  // the last record's topic, as Spark wants it: records come in runs of one topic
    private String topic;

    /** The row of {@code record}; valid until the next call (one row, filled again for each record). */
    InternalRow row(ConsumerRecord<byte[], byte[]> record) {
        if (!record.topic().equals(topic)) {
            topic = record.topic();
            topicName = UTF8String.fromString(topic);
        }
        values[0] = record.key();
        values[1] = record.value();
        values[2] = topicName;
        values[3] = record.partition();
        values[4] = record.offset();
        values[5] = record.timestamp() * 1000L;
        values[6] = record.timestampType().id;
        values[7] = headers(record);
        return row;
    }

    private GenericArrayData headers(ConsumerRecord<byte[], byte[]> record) {
        Header[] all = record.headers().toArray();
        if (all.length == 0) {
            return null;
        }
        Object[] rows = new Object[all.length];
        for (int i = 0; i < all.length; i++) {
            rows[i] = new GenericInternalRow(new Object[] {headerKey(all[i].key()), all[i].value()});
        }
        return new GenericArrayData(rows);
    }

    /** Spark's string of a header key: a record's keys are mostly the same few, so each is encoded once. */
    private UTF8String headerKey(String key) {
        UTF8String known = headerKeys.get(key);
        if (known == null) {
            if (headerKeys.size() >= KEYS_KEPT) {
                headerKeys.clear();
            }
            known = UTF8String.fromString(key);
            headerKeys.put(key, known);
        }
        return known;
    }
}
