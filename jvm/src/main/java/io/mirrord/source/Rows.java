package io.mirrord.source;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/** A Kafka record as a row with the columns (and types) of Spark's Kafka source with headers. */
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

    private final UnsafeProjection toUnsafe = UnsafeProjection.create(SCHEMA);
    private UTF8String topicName;  // the last record's topic, as Spark wants it: records come in runs of one topic
    private String topic;

    /** The row of {@code record}; valid until the next call (the projection reuses its buffer). */
    InternalRow row(ConsumerRecord<byte[], byte[]> record) {
        if (!record.topic().equals(topic)) {
            topic = record.topic();
            topicName = UTF8String.fromString(topic);
        }
        return toUnsafe.apply(new GenericInternalRow(new Object[] {
            record.key(), record.value(), topicName, record.partition(), record.offset(),
            record.timestamp() * 1000L, record.timestampType().id, headers(record)}));
    }

    private static GenericArrayData headers(ConsumerRecord<byte[], byte[]> record) {
        Header[] all = record.headers().toArray();
        if (all.length == 0) {
            return null;
        }
        Object[] rows = new Object[all.length];
        for (int i = 0; i < all.length; i++) {
            rows[i] = new GenericInternalRow(new Object[] {UTF8String.fromString(all[i].key()), all[i].value()});
        }
        return new GenericArrayData(rows);
    }
}
