package io.mirrord.sink;

import io.mirrord.fencing.Fence;
import io.mirrord.fencing.FencedError;
import io.mirrord.metrics.StageClock;
import io.mirrord.metrics.Stats;
import io.mirrord.source.Assignment;
import io.mirrord.source.Handed;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.execution.python.streaming.PythonForeachWriter;
import org.apache.spark.unsafe.types.UTF8String;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * mirrord's sink, for both deliveries (docs/decisions.md §2): a {@code ForeachWriter}, the one
 * writer of its own that real-time mode's sink allowlist admits (and a sink of micro-batch mode too), over the
 * columns of mirrord/spark/pipeline.py: source topic, key, value, headers, partition, source offset, source
 * timestamp (ms). A task's rows all come from one stream of mirrord's source, so the stream is known from its
 * first row, and its sender ({@link StreamSender}), one producer of the stream's own, kept by the JVM between
 * the stream's tasks ({@link StreamSenders}): {@link StreamSends} at least once, {@link StreamTransactions}
 * exactly once, under the transactional id {@code <prefix>-<stream>}. Each record is built once from its row:
 * the same key, value, headers and partition number, the source timestamp, into the target topic the policy
 * names (named once per source topic).
 *
 * <p>It extends {@link PythonForeachWriter} for one reason: Spark's {@code ForeachWriterTable} hands the plan's
 * {@code UnsafeRow}s unconverted to that class (and its subclasses), and every other {@code ForeachWriter} a
 * {@code Row} its encoder built (a {@code String} per topic and header key, boxed numbers, a list of rows). None of
 * the Python parent's machinery runs: every method it has is overridden here, its fields stay unset
 * (docs/decisions.md §2, measured there).
 *
 * <p>Exactly once, a task goes on with the producer its JVM kept only if no other can have opened since
 * ({@link #continues}); every task attempt is idempotent: a new producer of the stream fences the earlier ones
 * and reads what they committed, and rows below those positions are skipped (docs/decisions.md §12, rule 3).
 */
public final class MirrorWriter extends PythonForeachWriter {
    private static final long serialVersionUID = 1L;
    private static final Logger log = LoggerFactory.getLogger(MirrorWriter.class);
    /** Kafka's default is 60 s: a dead host's open transaction would hold read_committed readers that long. */
    public static final String TRANSACTION_TIMEOUT_MS_DEFAULT = "10000";
    static final int TOPIC = 0;
    static final int KEY = 1;
    static final int VALUE = 2;
    static final int HEADERS = 3;
    static final int PARTITION = 4;
    static final int OFFSET = 5;
    static final int TIMESTAMP = 6;

    private final HashMap<String, String> producerConfig;
    private final int streams;
    private final int partitions;
    private final boolean sized;
    private final String syncsTopic;
    private final long offsetLagMax;
    private final String targetPrefix;
    private final String idPrefix;  // null: at least once
    private final String positionsTopic;
    private final long intervalMs;
    private final String run = UUID.randomUUID().toString();  // this query start's writer, in every task's copy
    private boolean sourceArrays;  // no transform rewrites key or value: the consumer's arrays are the row's bytes
    private transient Handed handed;  // the record the task thread's reader made the row of
    private transient StreamSender sender;
    private transient long epoch;  // the batch of this task
    private transient HeaderKeys headerKeys;

    private MirrorWriter(Map<String, String> producerConfig, int streams, int partitions, boolean sized,
                         String syncsTopic, long offsetLagMax, String targetPrefix, String idPrefix,
                         String positionsTopic, long intervalMs) {
        super(null, null);  // no Python: see the class's comment
        this.producerConfig = new HashMap<>(producerConfig);
        this.streams = streams;
        this.partitions = partitions;
        this.sized = sized;
        this.syncsTopic = syncsTopic == null ? "" : syncsTopic;
        this.offsetLagMax = offsetLagMax;
        this.targetPrefix = targetPrefix == null ? "" : targetPrefix;
        this.idPrefix = idPrefix;
        this.positionsTopic = positionsTopic;
        this.intervalMs = intervalMs;
    }

    /**
     * At least once. {@code producerConfig}: the target's producer properties; {@code streams}: the source's
     * {@code num.streams}; {@code partitions}: the source partitions at the query's start; {@code sized}: whether
     * producer.properties left the pool's sizes to mirrord ({@link StreamProducers}); {@code syncsTopic} empty:
     * no offset syncs; {@code targetPrefix}: what the replication policy puts before a source topic's name.
     */
    public static MirrorWriter atLeastOnce(Map<String, String> producerConfig, int streams, int partitions,
                                           boolean sized, String syncsTopic, long offsetLagMax, String targetPrefix) {
        return new MirrorWriter(producerConfig, streams, partitions, sized, syncsTopic, offsetLagMax, targetPrefix,
                null, null, 0);
    }

    /** Exactly once: as {@link #atLeastOnce}, in transactions under {@code <idPrefix>-<stream>}. */
    public static MirrorWriter exactlyOnce(Map<String, String> producerConfig, int streams, int partitions,
                                           boolean sized, String syncsTopic, long offsetLagMax, String targetPrefix,
                                           String idPrefix, String positionsTopic, long intervalMs) {
        return new MirrorWriter(producerConfig, streams, partitions, sized, syncsTopic, offsetLagMax, targetPrefix,
                idPrefix, positionsTopic, intervalMs);
    }

    /** The transactional id of {@code stream} in a flow whose ids start with {@code prefix}. */
    public static String transactionalId(String prefix, int stream) {
        return prefix + "-" + stream;
    }

    /**
     * Whether no transform of the query rewrites a record's key or value (mirrord/spark/pipeline.py says so): then a
     * row's key and value are those of the record the task's reader made it of, and that record's own arrays are
     * sent, not a copy of the row's bytes (docs/decisions.md §2, "A record's bytes, once").
     */
    public MirrorWriter sourceArrays(boolean untransformed) {
        sourceArrays = untransformed;
        return this;
    }

    /** Stops every stream's sender this JVM keeps (the query stopped): what they buffered is delivered. */
    public static void closeAll() {
        StreamSenders.closeAll();
    }

    /**
     * Records this JVM's senders sent and the target has not yet acknowledged or failed: after a query
     * stopped, the positions are final once this is 0.
     */
    public static long inFlight() {
        return StreamSenders.inFlight();
    }

    @Override
    public boolean open(long partitionId, long epochId) {
        epoch = epochId;
        if (headerKeys == null) {
            headerKeys = new HeaderKeys();
        }
        if (sourceArrays && handed == null) {
            handed = Handed.onThisThread();  // Spark opens a task's writer in the thread that runs the task
        }
        return true;
    }

    /**
     * One row, as Spark's plan wrote it: an {@code UnsafeRow} of the writer's columns, read in place (no {@code Row}
     * conversion); header values are copied out once, as the producer needs arrays of their own, and so are key and
     * value unless the record the reader made the row of is sent as it came ({@link #sourceArrays}).
     */
    @Override
    public void process(UnsafeRow row) {
        UTF8String topic = row.getUTF8String(TOPIC);  // points into the row: never kept
        int partition = row.getInt(PARTITION);
        StreamSender s = sender;
        if (s == null) {
            s = claim(Assignment.streamOf(new TopicPartition(topic.toString(), partition), streams));
            s.reading(Handed.onThisThread());  // the task's reader, in this thread: its polls pace the commits
            sender = s;
        }
        Long timestamp = row.isNullAt(TIMESTAMP) ? null : row.getLong(TIMESTAMP);
        long offset = row.getLong(OFFSET);
        SourcePartition source = s.partitions().of(topic, partition);
        ConsumerRecord<byte[], byte[]> record = handed == null ? null : handed.last();
        boolean same = isRowOf(record, source.tp, offset);
        s.send(source, offset, timestamp != null && timestamp >= 0 ? timestamp : null,  // unknown: the producer's clock
                same ? record.key() : row.getBinary(KEY), same ? record.value() : row.getBinary(VALUE), headers(row));
        if (timestamp != null) {
            StageClock.reached(StageClock.SENT, offset, timestamp);
        }
    }

    /** Whether {@code record} is the one at {@code offset} of {@code tp}: a row's, when the row says so. */
    static boolean isRowOf(ConsumerRecord<byte[], byte[]> record, TopicPartition tp, long offset) {
        return record != null && record.offset() == offset && record.partition() == tp.partition()
                && record.topic().equals(tp.topic());
    }

    private Headers headers(UnsafeRow row) {
        if (row.isNullAt(HEADERS)) {
            return null;
        }
        ArrayData list = row.getArray(HEADERS);
        int n = list.numElements();
        if (n == 0) {
            return null;
        }
        RecordHeaders headers = new RecordHeaders();
        for (int i = 0; i < n; i++) {
            InternalRow h = list.getStruct(i, 2);
            headers.add(h.isNullAt(0) ? null : headerKeys.of(h.getUTF8String(0)), h.getBinary(1));
        }
        return headers;
    }

    @Override
    public void close(Throwable error) {
        StreamSender mine = sender;
        sender = null;
        if (mine == null) {
            return;
        }
        boolean keep = false;
        try {
            if (error == null) {
                mine.taskEnded();
                keep = true;
            } else {
                keep = mine.taskFailed();
            }
        } catch (RuntimeException e) {
            mine.close();
            throw e;
        } finally {
            StreamSenders.done(mine, keep, run, epoch);
        }
    }

    private StreamSender claim(int stream) {
        String id = idPrefix == null ? "at-least-once-" + stream : transactionalId(idPrefix, stream);
        StreamSender claimed = StreamSenders.claim(id, this::continues, () -> create(id, stream));
        if (idPrefix != null) {
            StreamSenders.tickEvery(Math.max(5, intervalMs / 4));
        }
        return claimed;
    }

    /**
     * Whether this task may go on with the stream's sender its JVM kept. At least once: within one query start (a
     * new start may have new settings). Exactly once, also only if no other producer of the stream opened since:
     * always when one JVM runs every task (mirrord's local master); on a cluster only if this JVM ran the stream's
     * task of the batch before and this is the task's first attempt, else the stream ran elsewhere meanwhile.
     */
    private boolean continues(StreamSenders.Idle kept) {
        if (!kept.run().equals(run)) {
            return false;
        }
        if (idPrefix == null) {
            return true;
        }
        SparkEnv env = SparkEnv.get();
        boolean oneJvm = env == null || "driver".equals(env.executorId());  // SparkContext.DRIVER_IDENTIFIER
        TaskContext task = TaskContext.get();
        boolean firstAttempt = task == null || task.attemptNumber() == 0;
        return oneJvm || firstAttempt && kept.epoch() == epoch - 1;
    }

    private StreamSender create(String id, int stream) {
        Map<String, Object> config = StreamProducers.config(producerConfig, stream, streams, partitions, sized);
        if (idPrefix == null) {
            StreamSends sends = new StreamSends(id, new KafkaProducer<>(config), syncsTopic, offsetLagMax,
                    StreamSends.SYNCS_FLUSH_MS, Stats.EXECUTOR, targetPrefix, true,
                    StreamProducers.bound(producerConfig));
            sends.nameTargetTopics(producerConfig, targetPrefix);
            log.info("stream {} writes with a producer of its own (batch.size {}, buffer.memory {})", stream,
                    config.getOrDefault(ProducerConfig.BATCH_SIZE_CONFIG, "Kafka's default"),
                    config.getOrDefault(ProducerConfig.BUFFER_MEMORY_CONFIG, "Kafka's default"));
            return sends;
        }
        if (!Fence.open()) {  // a lapsed host must not fence the stream's producer on the host that holds the flow
            throw new FencedError("transactional id " + id + " not opened: this host's lease lapsed (fenced)");
        }
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.putIfAbsent(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, TRANSACTION_TIMEOUT_MS_DEFAULT);
        long timeoutMs = Long.parseLong(producerConfig.getOrDefault(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000"));
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config);
        try {
            StreamTransactions t = new StreamTransactions(producer, id, positionsTopic, syncsTopic, offsetLagMax,
                    intervalMs, Stats.EXECUTOR, targetPrefix, System::currentTimeMillis, () -> CommittedPositions.read(
                            producerConfig, id + "-positions", positionsTopic,
                            tp -> Assignment.streamOf(tp, streams) == stream, timeoutMs));
            log.info("stream transactions under transactional id {}; {} partitions resume at committed positions",
                    id, t.earlier.partitions());
            t.nameTargetTopics(producerConfig, targetPrefix);
            return t;
        } catch (RuntimeException e) {
            StreamSender.uninterrupted(() -> producer.close(Duration.ZERO));
            throw e;
        }
    }
}
