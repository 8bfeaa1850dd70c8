package io.mirrord.source;

import io.mirrord.metrics.StageClock;
import io.mirrord.metrics.Stats;
import io.mirrord.positions.Incarnations;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One stream's consumer and what it fetched but has not handed out yet, kept from one batch to the next of the same run
 * ({@link StreamConsumers}). A batch names the stream's partitions and where each starts; a partition that continues
 * where the last batch left it is neither sought nor fetched again.
 *
 * <p>Micro-batch mode: each partition is read up to its planned end; records fetched beyond it wait for the next batch,
 * and the partition is paused meanwhile. Real-time mode: records are handed out until the batch's deadline, and every
 * {@code topic.refresh.ms} the stream looks for partitions that match and are its own ({@link TopicLook}), taking one
 * up from its start. Records deleted from the source before they were read are skipped with a log line naming the
 * offsets (the supervisor counts them as lost); a partition gone from the source (its topic deleted) is dropped, what
 * it held and this stream never handed out counted lost. A stream that finds nothing for a while rests ({@link
 * IdlePace}).
 */
final class StreamConsumer {
    private static final Logger log = LoggerFactory.getLogger(StreamConsumer.class);

    final String run;
    final int stream;
    final SourceOptions options;
    volatile long idleSince;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final TopicLook topics;
    private final Fetched fetched = new Fetched();
    private final IdlePace pace;
    private final Map<TopicPartition, Long> next = new HashMap<>();  // next offset to hand out, per partition
    private Map<TopicPartition, Long> until;  // micro-batch mode: where each partition's batch ends
    private final Set<TopicPartition> open = new HashSet<>();  // micro-batch mode: not read to the end yet
    private final FromStart fromStart = new FromStart();  // taken up from their start on its own, this batch
    private long lookedAt;
    private long progressAt;
    // the partition of the last record handed out, and the offset after it (written to `next` on a change)
    private TopicPartition current;
    private long currentNext;
    private long currentUntil = Long.MAX_VALUE;

    StreamConsumer(SourceOptions options, String run, int stream) {
        this.options = options;
        this.run = run;
        this.stream = stream;
        Map<String, Object> config = options.consumerConfig("stream-" + stream);
        this.consumer = new KafkaConsumer<>(config);
        this.topics = new TopicLook(consumer, options, stream);
        this.pace = new IdlePace(options.fetchMaxWaitMs(), Doorbell.of(config));
    }

    /** A batch begins: these partitions, from these offsets, up to these ends (null: real-time mode). */
    void begin(Map<TopicPartition, Long> from, Map<TopicPartition, Long> ends) {
        flush();
        current = null;
        until = ends;
        Set<TopicPartition> wanted = from.keySet();
        if (!wanted.equals(consumer.assignment())) {
            topics.dropped(consumer.assignment(), wanted, next);
            consumer.assign(wanted);
        }
        fetched.retain(wanted);
        next.keySet().retainAll(wanted);
        consumer.resume(consumer.paused());
        open.clear();
        from.forEach((tp, offset) -> {
            Long at = next.get(tp);
            if (at == null || at.longValue() != offset) {
                fetched.forget(tp);
                consumer.seek(tp, offset);
                next.put(tp, offset);
            }
            if (ends != null && offset < ends.get(tp)) {
                open.add(tp);
            }
            fetched.release(tp);
        });
        if (ends != null) {
            Set<TopicPartition> done = new HashSet<>(wanted);
            done.removeAll(open);
            consumer.pause(done);
        }
        fromStart.clear();
        lookedAt = progressAt = System.currentTimeMillis();
    }

    /** The next record, or null when the batch is over: at {@code deadline}, or each partition read to its end. */
    ConsumerRecord<byte[], byte[]> next(long deadline) {
        while (true) {
            ConsumerRecord<byte[], byte[]> record = fetched.poll();
            if (record != null) {
                if (current == null || record.partition() != current.partition() || !record.topic().equals(current.topic())) {
                    switchTo(new TopicPartition(record.topic(), record.partition()));
                }
                if (record.offset() >= currentUntil) {  // beyond this batch: kept for the next
                    fetched.hold(current, record);
                    close(current);
                    continue;
                }
                currentNext = record.offset() + 1;
                StageClock.reached(StageClock.HANDED, record.offset(), record.timestamp());
                return record;
            }
            if (until != null && finished()) {
                return null;
            }
            long now = System.currentTimeMillis();
            if (now >= deadline) {
                return null;
            }
            if (until == null && now - lookedAt >= topics.lookEveryMs()) {
                look(now);
            } else if (until != null && now - progressAt >= options.refreshMs) {
                stalled(now);
            }
            fetch(Math.min(deadline - now, topics.lookEveryMs()));
        }
    }

    private void switchTo(TopicPartition tp) {
        flush();
        current = tp;
        currentNext = next.getOrDefault(tp, 0L);
        currentUntil = until == null ? Long.MAX_VALUE : until.getOrDefault(tp, Long.MAX_VALUE);
    }

    private void flush() {
        if (current != null) {
            next.put(current, currentNext);
            if (until != null && currentNext >= currentUntil) {
                close(current);
            }
        }
    }

    private void close(TopicPartition tp) {
        if (open.remove(tp)) {
            consumer.pause(Set.of(tp));
        }
    }

    /** Micro-batch mode: whether every partition was read to its end (past markers and gaps too). */
    private boolean finished() {
        flush();
        for (TopicPartition tp : new HashSet<>(open)) {
            if (!fetched.holds(tp) && consumer.position(tp) >= until.get(tp)) {
                next.put(tp, Math.max(next.get(tp), until.get(tp)));
                close(tp);
            }
        }
        return open.isEmpty();
    }

    private void fetch(long timeoutMs) {
        if (consumer.assignment().isEmpty()) {
            IdlePace.sleep(Math.max(1, timeoutMs));
            return;
        }
        try {
            long began = System.currentTimeMillis();
            if (pace.waitedOnBell(consumer, began, Math.max(0, timeoutMs))) {
                return;
            }
            ConsumerRecords<byte[], byte[]> records = Handed.onThisThread().poll(consumer,
                pace.pollMs(began, Math.max(0, timeoutMs)), options.maxPollRecords);
            fetched.add(records);
            long now = System.currentTimeMillis();
            if (!records.isEmpty()) {
                progressAt = now;
            }
            IdlePace.sleep(pace.polled(began, !records.isEmpty(), now, timeoutMs - (now - began)));
        } catch (OffsetOutOfRangeException e) {
            outOfRange(e.offsetOutOfRangePartitions());
        }
    }

    /**
     * Partitions whose next offset the source no longer holds: below its log start, records deleted
     * before they were read (skipped to the log start, named in the log, lost: {@link Stats#addLost}); above
     * its end, a topic recreated (read from its start).
     */
    private void outOfRange(Map<TopicPartition, Long> offsets) {
        fromStart.ask(offsets.keySet());
        Map<TopicPartition, Long> starts = consumer.beginningOffsets(offsets.keySet());
        offsets.forEach((tp, at) -> {
            long start = starts.get(tp);
            if (at < start) {
                log.warn("{}: offsets {} to {} were deleted from the source before they were read; reading on "
                    + "from {}", tp, at, start - 1, start);
                Stats.EXECUTOR.addLost(tp.topic(), tp.partition(), at, start, Stats.RECORDS_DELETED);
            } else {
                log.warn("{}: offset {} is beyond the source's end (the topic was recreated); reading it from "
                    + "its start, {}", tp, at, start);
                Incarnations.set(tp, Incarnations.UNKNOWN);  // not what the driver planned: not counted until planned
                fromStart.add(tp);
            }
            consumer.seek(tp, start);
            if (tp.equals(current)) {
                currentNext = start;
            } else {
                next.put(tp, start);
            }
        });
    }

    /** Real-time mode: partitions of this stream that appeared are read from their start, ones gone dropped. */
    private void look(long now) {
        lookedAt = now;
        Set<TopicPartition> assigned = consumer.assignment();
        TopicLook.Change change = topics.change(assigned, now);
        if (change.none()) {
            return;
        }
        flush();
        current = null;
        change.gone().forEach(tp -> topics.lost(tp, next.getOrDefault(tp, Long.MAX_VALUE), topics.fetchedEnd(tp)));
        Set<TopicPartition> assignment = new HashSet<>(assigned);
        assignment.removeAll(change.gone());
        assignment.addAll(change.ready());
        fetched.drop(change.gone());
        next.keySet().removeAll(change.gone());
        consumer.assign(assignment);
        if (!change.gone().isEmpty()) {
            log.info("stream {}: partitions gone from the source: {}", stream, change.gone());
        }
        if (!change.ready().isEmpty()) {
            fromStart.ask(change.ready());
            Map<TopicPartition, Long> starts = consumer.beginningOffsets(change.ready(), TopicLook.ASK_TIMEOUT);
            starts.forEach((tp, start) -> {
                Incarnations.set(tp, Incarnations.UNKNOWN);  // found here, not planned: counted from the next batch
                consumer.seek(tp, start);
                next.put(tp, start);
                fromStart.add(tp);
            });
            log.info("stream {}: new partitions, read from their start: {}", stream, starts);
        }
    }

    /** Micro-batch mode, no record for a while: partitions whose topic was deleted end here. */
    private void stalled(long now) {
        if (now - progressAt >= options.pollTimeoutMs) {
            throw new IllegalStateException("stream " + stream + ": partitions " + open + " gave no record for "
                + options.pollTimeoutMs + " ms before their batch's end " + until);
        }
        Set<TopicPartition> existing = topics.existing();
        if (existing == null) {
            return;
        }
        for (TopicPartition tp : new HashSet<>(open)) {
            if (!existing.contains(tp)) {
                topics.lost(tp, next.get(tp), until.get(tp));
                next.put(tp, until.get(tp));
                close(tp);
            }
        }
        progressAt = now;
    }

    /** The next offset of every partition, past transaction markers and gaps where nothing waits. */
    Map<TopicPartition, Long> positions() {
        flush();
        Set<TopicPartition> waiting = fetched.waiting();
        Map<TopicPartition, Long> positions = new HashMap<>(next);
        for (TopicPartition tp : consumer.assignment()) {
            if (!waiting.contains(tp)) {
                positions.merge(tp, consumer.position(tp), Math::max);
            }
        }
        return positions;
    }

    /** The partitions this batch took up from their start on its own (new, or recreated under it). */
    FromStart readFromStart() {
        return fromStart;
    }

    /** The batch is over: what was fetched and not handed out waits for the next batch. */
    void end() {
        flush();
        current = null;
        fetched.end();
    }

    void close() {
        pace.close();
        Doorbell.close(consumer, "stream " + stream + "'s consumer");
    }
}
