package io.mirrord.source;

import io.mirrord.positions.Incarnations;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.record.TimestampType;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;

/**
 * One task of one stream: hands out its consumer's records as rows, in micro-batch mode up to the batch's
 * planned ends, in real-time mode until the deadline Spark gives. At the end the consumer goes back to
 * the pool for the stream's next batch, unless it failed.
 */
final class StreamReader implements SupportsRealTimeRead<InternalRow> {
    private final StreamConsumer consumer;
    private final Rows rows = new Rows();
    private Handed handed;  // the thread's that takes the rows, known at the first
    private ConsumerRecord<byte[], byte[]> record;
    private boolean failed;
    private boolean closed;

    StreamReader(StreamSplit split, StreamConsumer consumer) {
        this.consumer = consumer;
        split.incarnations.forEach(Incarnations::set);  // before any record is handed out
        split.topicIds.forEach(Incarnations::setTopicId);
        try {
            consumer.begin(split.from, split.until);
        } catch (RuntimeException e) {
            failed = true;
            throw e;
        }
    }

    @Override
    public boolean next() {
        return advance(Long.MAX_VALUE);
    }

    @Override
    public RecordStatus nextWithTimeout(Long startTimeMs, Long timeoutMs) {
        if (!advance(startTimeMs + timeoutMs)) {
            return RecordStatus.newStatusWithoutArrivalTime(false);
        }
        if (record.timestampType() == TimestampType.LOG_APPEND_TIME) {
            return RecordStatus.newStatusWithArrivalTimeMs(record.timestamp());
        }
        return RecordStatus.newStatusWithoutArrivalTime(true);
    }

    private boolean advance(long deadline) {
        try {
            record = consumer.next(deadline);
        } catch (RuntimeException e) {
            failed = true;
            throw e;
        }
        return record != null;
    }

    @Override
    public InternalRow get() {
        if (handed == null) {
            handed = Handed.onThisThread();
        }
        handed.made(record);
        return rows.row(record);
    }

    @Override
    public PartitionOffset getOffset() {
        return new StreamPosition(consumer.positions(), consumer.readFromStart());
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (handed != null) {
            handed.clear();
        }
        if (failed || Thread.currentThread().isInterrupted()) {
            consumer.close();
            return;
        }
        try {
            consumer.end();
            StreamConsumers.giveBack(consumer);
        } catch (RuntimeException e) {
            consumer.close();
        }
    }
}
