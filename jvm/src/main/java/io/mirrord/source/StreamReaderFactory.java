package io.mirrord.source;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/** Makes a task's reader: its stream's consumer, kept from the stream's last batch when it ran here. */
final class StreamReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        StreamSplit split = (StreamSplit) partition;
        return new StreamReader(split, StreamConsumers.borrow(split));
    }
}
