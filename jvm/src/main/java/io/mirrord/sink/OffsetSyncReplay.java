package io.mirrord.sink;

import io.mirrord.metrics.Stats;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;

/**
 * Replays histories of acknowledgements through the real {@link OffsetSyncWriter} (its
 * {@link SyncRuns} rules) and prints the syncs each writer emitted, so that a test
 * outside the JVM (tests/unit/test_offsets_property.py) checks translation on the syncs mirrord really
 * writes, not on a copy of its rules. Many histories per run, one JVM: a history is a few lines on stdin,
 * its syncs one line on stdout.
 *
 * <pre>
 * h LAG          a new history; its writers use offset.lag.max = LAG
 * a W UP DOWN    writer W (any token) acknowledged: source offset UP is at target offset DOWN
 * f W            writer W's thread emits its delayed sync (every mirrord.offset.syncs.flush.ms)
 * r W            writer W's run is reset (a failed send, an offset unknown)
 * n W            writer W names target topics from now on, their ids not known yet
 * x W ID         writer W sees the target topic's id ID (its first, or a new one: the topic was recreated)
 * e              the end: every writer emits its delayed sync; prints the history's syncs in the order
 *                they were emitted, "W:UP:DOWN:RUNSTART:EARLIER:ID:BEFORE" separated by spaces, on one line,
 *                EARLIER being the writer's earlier runs the sync carries, UP,DOWN,RUNSTART triples joined by
 *                commas (empty if none), ID the target topic's id the sync names (empty if none, ? if not
 *                known to the writer), BEFORE its
 *                runs from before it heard of the target topic's recreation, as EARLIER
 * </pre>
 *
 * Not used by mirrord itself; run as {@code java -cp <mirrord-jvm.jar, kafka-clients, slf4j-api>
 * io.mirrord.sink.OffsetSyncReplay}. Exits 2 on a line it cannot read.
 */
public final class OffsetSyncReplay {
    private static final TopicPartition SOURCE = new TopicPartition("t", 0);

    private OffsetSyncReplay() {
    }

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
        try {
            replay(in, out);
        } catch (IllegalArgumentException e) {
            out.flush();
            System.err.println("OffsetSyncReplay: " + e.getMessage());
            System.exit(2);
        }
    }

    /** Replays every history read from {@code in}, writing each one's syncs to {@code out} at its end. */
    static void replay(BufferedReader in, Writer out) throws IOException {
        Stats stats = new Stats();
        Map<String, OffsetSyncWriter> writers = new LinkedHashMap<>();
        Map<String, TargetTopicIds> ids = new LinkedHashMap<>();
        List<String> emitted = new ArrayList<>();
        long lagMax = 100;
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] f = line.trim().split(" ");
            try {
                switch (f[0]) {
                    case "h" -> {
                        lagMax = Long.parseLong(f[1]);
                        writers.clear();
                        ids.clear();
                        emitted.clear();
                    }
                    case "a" -> {
                        OffsetSyncWriter writer = writer(writers, f[1], lagMax, stats);
                        writer.acked(SOURCE, Long.parseLong(f[2]), Long.parseLong(f[3]));
                        take(f[1], writer, emitted);
                    }
                    case "f" -> {
                        OffsetSyncWriter writer = writer(writers, f[1], lagMax, stats);
                        writer.flushPending();
                        take(f[1], writer, emitted);
                    }
                    case "r" -> {
                        OffsetSyncWriter writer = writer(writers, f[1], lagMax, stats);
                        writer.reset(writer.state(SOURCE));
                        take(f[1], writer, emitted);
                    }
                    case "n", "x" -> {
                        OffsetSyncWriter writer = writer(writers, f[1], lagMax, stats);
                        TargetTopicIds named = ids.computeIfAbsent(f[1], n -> writer.nameTargetTopics(null, ""));
                        if (f[0].equals("x")) {
                            named.seen(SOURCE.topic(), f[2]);
                        }
                        take(f[1], writer, emitted);
                    }
                    case "e" -> {
                        for (Map.Entry<String, OffsetSyncWriter> w : writers.entrySet()) {
                            w.getValue().flushPending();
                            take(w.getKey(), w.getValue(), emitted);
                        }
                        out.write(String.join(" ", emitted));
                        out.write('\n');
                        out.flush();
                        writers.clear();
                        ids.clear();
                        emitted.clear();
                    }
                    case "" -> {
                    }
                    default -> throw new IllegalArgumentException("unknown command");
                }
            } catch (RuntimeException e) {
                throw new IllegalArgumentException("cannot read line \"" + line + "\": " + e, e);
            }
        }
        out.flush();
    }

    private static OffsetSyncWriter writer(Map<String, OffsetSyncWriter> writers, String name, long lagMax,
                                           Stats stats) {
        // no producer, no thread: the syncs are taken from the writer's outbox as they are emitted
        return writers.computeIfAbsent(name, n -> new OffsetSyncWriter(null, "syncs", lagMax, 1000, stats, false));
    }

    private static String joined(long[] values) {
        StringBuilder out = new StringBuilder();
        for (long v : values) {
            out.append(out.isEmpty() ? "" : ",").append(v);
        }
        return out.toString();
    }

    private static void take(String name, OffsetSyncWriter writer, List<String> emitted) {
        for (OffsetSync sync : writer.takeQueued()) {
            String earlier = joined(sync.earlier());
            emitted.add(name + ":" + sync.upstream() + ":" + sync.downstream() + ":" + sync.runStart() + ":" + earlier
                    + ":" + (sync.targetTopicId() == null ? "" : sync.targetTopicId().isEmpty() ? "?" : sync.targetTopicId())
                    + ":" + joined(sync.before()));
        }
    }
}
