package io.mirrord.sink;

import io.mirrord.fencing.Fence;
import io.mirrord.fencing.FencedError;
import io.mirrord.metrics.Stats;
import io.mirrord.source.Assignment;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * mirrord's sink in exactly-once mode (docs/decisions.md §12): a {@link ForeachWriter} (on real-time mode's
 * sink allowlist, and a sink of micro-batch mode too) over the same columns Spark's Kafka sink takes (topic,
 * key in mirrord's {@link Envelope}, value, headers, partition). A task's rows all come from one stream of
 * mirrord's source, so the stream is known from its first row, and so is its transactional id,
 * {@code <prefix>-<stream>}: {@link StreamTransactions} writes the rows in transactions under it.
 *
 * <p>A stream's transactions are kept by the JVM between its tasks (one batch after another), so a
 * transactional producer is initialised once per owner and not once per batch; a task that fails aborts
 * and drops them. On a cluster the stream's next task may run in another executor, whose new producer fences
 * this one: a task goes on with the producer its JVM keeps only if no other can have opened since
 * ({@link #continues}). A timer commits a stream's transaction once it is {@code transaction.interval.ms} old
 * while its task waits for records.
 *
 * <p>Every task attempt is idempotent: Spark runs a task again from its batch's start when its executor was
 * lost (a retried attempt, or a re-run it does not even count as a failure: a worker lost or decommissioned),
 * and the attempt before may have committed some of the batch. A new producer of the stream fences the earlier
 * ones ({@code initTransactions}) and then reads what they committed ({@link CommittedPositions}); rows below
 * those positions are skipped (docs/decisions.md §12, rule 3).
 */
public final class TransactionalWriter extends ForeachWriter<Row> {
    private static final long serialVersionUID = 1L;
    private static final Logger log = LoggerFactory.getLogger(TransactionalWriter.class);
    /** Kafka's default is 60 s: a dead host's open transaction would hold read_committed readers that long. */
    public static final String TRANSACTION_TIMEOUT_MS_DEFAULT = "10000";
    private static final Map<String, Idle> IDLE = new ConcurrentHashMap<>();
    private static final Set<StreamTransactions> BUSY = ConcurrentHashMap.newKeySet();
    private static final ScheduledExecutorService TIMER = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "mirrord-transactions");
        t.setDaemon(true);
        return t;
    });
    private static volatile boolean ticking;

    private final HashMap<String, String> producerConfig;
    private final String idPrefix;
    private final int streams;
    private final String positionsTopic;
    private final String syncsTopic;
    private final long offsetLagMax;
    private final long intervalMs;
    private final String sourceTopicPrefix;
    private final String run = UUID.randomUUID().toString();  // this query start's writer, in every task's copy
    private transient StreamTransactions tx;
    private transient long epoch;  // the batch of this task

    /** A stream's transactions between its tasks, with the query start and the batch whose task used them last. */
    private record Idle(StreamTransactions tx, String run, long epoch) {
    }

    /**
     * {@code producerConfig}: the target's producer properties; {@code idPrefix}: the flow's transactional-id
     * prefix; {@code streams}: the source's {@code num.streams}; {@code syncsTopic} empty: no offset syncs.
     */
    public TransactionalWriter(Map<String, String> producerConfig, String idPrefix, int streams, String positionsTopic,
                               String syncsTopic, long offsetLagMax, long intervalMs, String sourceTopicPrefix) {
        this.producerConfig = new HashMap<>(producerConfig);
        this.idPrefix = idPrefix;
        this.streams = streams;
        this.positionsTopic = positionsTopic;
        this.syncsTopic = syncsTopic;
        this.offsetLagMax = offsetLagMax;
        this.intervalMs = intervalMs;
        this.sourceTopicPrefix = sourceTopicPrefix == null ? "" : sourceTopicPrefix;
    }

    /** The transactional id of {@code stream} in a flow whose ids start with {@code prefix}. */
    public static String transactionalId(String prefix, int stream) {
        return prefix + "-" + stream;
    }

    @Override
    public boolean open(long partitionId, long epochId) {
        epoch = epochId;
        return true;
    }

    @Override
    public void process(Row row) {
        String target = row.getString(0);
        Envelope.Unwrapped source = Envelope.unwrap(row.getAs(1));
        Integer partition = row.isNullAt(4) ? null : row.getInt(4);
        TopicPartition from = new TopicPartition(sourceTopic(target), partition == null ? -1 : partition);
        if (tx == null) {
            tx = claim(Assignment.streamOf(from, streams));
        }
        if (tx.earlier.copied(from, source.sourceOffset())) {
            return;
        }
        RecordHeaders headers = new RecordHeaders();
        if (!row.isNullAt(3)) {
            List<Row> list = row.getList(3);
            for (Row h : list) {
                headers.add(h.getString(0), h.isNullAt(1) ? null : h.getAs(1));
            }
        }
        Long timestamp = source.timestampMs() >= 0 ? source.timestampMs() : null;
        tx.send(from, source.sourceOffset(), target, partition, timestamp, source.key(), row.getAs(2), headers);
        HoldPoint.reach("open");
        tx.commitIfDue();
    }

    @Override
    public void close(Throwable error) {
        StreamTransactions mine = tx;
        tx = null;
        if (mine == null) {
            return;
        }
        BUSY.remove(mine);
        long skipped = mine.earlier.takeSkipped();
        if (skipped > 0) {
            log.warn("transactional id {}: {} records of this batch were committed by an earlier attempt of its "
                    + "task, not copied again", mine.id, skipped);
        }
        if (error == null) {
            try {
                HoldPoint.reach("boundary");
                mine.commit();
                IDLE.put(mine.id, new Idle(mine, run, epoch));
                return;
            } catch (RuntimeException e) {
                drop(mine);
                throw e;
            }
        }
        drop(mine);
    }

    /** Stops every stream's transactions this JVM keeps (the query stopped). */
    public static void closeAll() {
        for (String id : List.copyOf(IDLE.keySet())) {
            Idle t = IDLE.remove(id);
            if (t != null) {
                t.tx().close();
            }
        }
    }

    private StreamTransactions claim(int stream) {
        String id = transactionalId(idPrefix, stream);
        Idle kept = IDLE.remove(id);
        if (kept != null && !continues(kept)) {
            kept.tx().close();  // fenced, or about to be: the stream's new producer fences and reads what was committed
            kept = null;
        }
        StreamTransactions claimed = kept != null ? kept.tx() : create(id, stream);
        BUSY.add(claimed);
        startTimer();
        return claimed;
    }

    /**
     * Whether this task may go on with the stream's producer its JVM kept, that is no other producer of the stream
     * opened since: within one query start (a start fences every producer of the flow), always when one JVM runs
     * every task (mirrord's local master); on a cluster only if this JVM ran the stream's task of the batch before
     * and this is the task's first attempt, else the stream ran elsewhere meanwhile (Spark places each batch's task
     * on any executor, and runs an attempt again on another).
     */
    private boolean continues(Idle kept) {
        SparkEnv env = SparkEnv.get();
        boolean oneJvm = env == null || "driver".equals(env.executorId());  // SparkContext.DRIVER_IDENTIFIER
        TaskContext task = TaskContext.get();
        boolean firstAttempt = task == null || task.attemptNumber() == 0;
        return kept.run().equals(run) && (oneJvm || firstAttempt && kept.epoch() == epoch - 1);
    }

    private StreamTransactions create(String id, int stream) {
        if (!Fence.open()) {  // a lapsed host must not fence the stream's producer on the host that holds the flow
            throw new FencedError("transactional id " + id + " not opened: this host's lease lapsed (fenced)");
        }
        Map<String, Object> config = new HashMap<>(producerConfig);
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.putIfAbsent(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, TRANSACTION_TIMEOUT_MS_DEFAULT);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        long timeoutMs = Long.parseLong(producerConfig.getOrDefault(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000"));
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config);
        try {
            StreamTransactions t = new StreamTransactions(producer, id, positionsTopic, syncsTopic, offsetLagMax,
                    intervalMs, Stats.EXECUTOR, System::currentTimeMillis, () -> CommittedPositions.read(
                            producerConfig, id + "-positions", positionsTopic,
                            tp -> Assignment.streamOf(tp, streams) == stream, timeoutMs));
            log.info("stream transactions under transactional id {}; {} partitions resume at committed positions",
                    id, t.earlier.partitions());
            t.nameTargetTopics(producerConfig, sourceTopicPrefix);
            return t;
        } catch (RuntimeException e) {
            producer.close(Duration.ZERO);
            throw e;
        }
    }

    private void startTimer() {
        if (!ticking) {
            synchronized (TransactionalWriter.class) {
                if (!ticking) {
                    long tick = Math.max(5, intervalMs / 4);
                    TIMER.scheduleWithFixedDelay(TransactionalWriter::tick, tick, tick, TimeUnit.MILLISECONDS);
                    ticking = true;
                }
            }
        }
    }

    private static void tick() {
        for (StreamTransactions t : BUSY) {
            try {
                t.commitIfDue();
            } catch (RuntimeException e) {
                // remembered by the commit: the task's next send or its close fails with it; the timer goes on for
                // the other streams
                log.debug("transaction of {} failed at a timed commit: {}", t.id, e.toString());
            }
        }
    }

    private static void drop(StreamTransactions t) {
        try {
            t.abort();
        } catch (RuntimeException e) {
            log.debug("abort of {} failed: {}", t.id, e.toString());
        }
        t.close();
    }

    private String sourceTopic(String targetTopic) {
        return targetTopic.startsWith(sourceTopicPrefix) ? targetTopic.substring(sourceTopicPrefix.length())
                : targetTopic;
    }
}
