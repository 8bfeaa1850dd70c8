package io.mirrord.source;

import io.mirrord.metrics.StageClock;
import java.util.ArrayDeque;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.common.TopicPartition;

/**
 * What a stream's consumer fetched and has not handed out: the records of this batch in the order they came,
 * and, per partition, those kept for a later batch (fetched beyond a micro-batch's end, or left when a batch
 * ended).
 */
final class Fetched {
    private final ArrayDeque<ConsumerRecord<byte[], byte[]>> queue = new ArrayDeque<>();
    private final Map<TopicPartition, ArrayDeque<ConsumerRecord<byte[], byte[]>>> held = new HashMap<>();

    void add(ConsumerRecords<byte[], byte[]> records) {
        StageClock.polled(records.count());
        for (ConsumerRecord<byte[], byte[]> record : records) {
            StageClock.reached(StageClock.FETCHED, record.offset(), record.timestamp());
            queue.add(record);
        }
    }

    /** The next record of this batch, or null. */
    ConsumerRecord<byte[], byte[]> poll() {
        return queue.poll();
    }

    boolean isEmpty() {
        return queue.isEmpty();
    }

    /** Keeps {@code record} of {@code tp} for a later batch. */
    void hold(TopicPartition tp, ConsumerRecord<byte[], byte[]> record) {
        held.computeIfAbsent(tp, p -> new ArrayDeque<>()).add(record);
    }

    boolean holds(TopicPartition tp) {
        return held.containsKey(tp);
    }

    /** A batch reads {@code tp} on from where its kept records start: they are this batch's now. */
    void release(TopicPartition tp) {
        ArrayDeque<ConsumerRecord<byte[], byte[]>> waiting = held.remove(tp);
        if (waiting != null) {
            queue.addAll(waiting);
        }
    }

    /** Forgets what was kept of {@code tp} (it is read from elsewhere). */
    void forget(TopicPartition tp) {
        held.remove(tp);
    }

    /** Forgets what was kept of partitions not in {@code partitions}. */
    void retain(Set<TopicPartition> partitions) {
        held.keySet().retainAll(partitions);
    }

    /** Drops every record of {@code partitions}, of this batch or kept (gone from the source). */
    void drop(Collection<TopicPartition> partitions) {
        queue.removeIf(r -> partitions.contains(new TopicPartition(r.topic(), r.partition())));
        held.keySet().removeAll(partitions);
    }

    /** The partitions with records not handed out. */
    Set<TopicPartition> waiting() {
        Set<TopicPartition> waiting = new HashSet<>(held.keySet());
        for (ConsumerRecord<byte[], byte[]> record : queue) {
            waiting.add(new TopicPartition(record.topic(), record.partition()));
        }
        return waiting;
    }

    /** The batch is over: its records not handed out are kept for the next. */
    void end() {
        for (ConsumerRecord<byte[], byte[]> record : queue) {
            hold(new TopicPartition(record.topic(), record.partition()), record);
        }
        queue.clear();
    }
}
