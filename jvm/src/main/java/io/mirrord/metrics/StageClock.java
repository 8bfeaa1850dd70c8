package io.mirrord.metrics;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Where a record's milliseconds go, for the bench (issue 32 item 0; BENCHMARKS.md, "Where the stream's
 * milliseconds go"): off unless the JVM runs with {@code -Dmirrord.stages=<file>}. Records whose source offset is
 * a multiple of {@link #SAMPLE} are timed at each stage against their source timestamp (the bench's producer
 * stamps its send time): when the source's consumer returned them from a poll, when the source handed them to
 * Spark, when the writer gave them to the producer, when the target acknowledged them. Each stage is a histogram
 * of whole milliseconds (0 to {@link #MAX_MS}, the last bucket holds the rest), written to the file as JSON every
 * second by a daemon thread, with the polls that returned records and the records they returned.
 */
public final class StageClock {
    public static final int FETCHED = 0;
    public static final int HANDED = 1;
    public static final int SENT = 2;
    public static final int ACKED = 3;
    static final String[] NAMES = {"fetched", "handed", "sent", "acked"};
    static final int SAMPLE = 16;
    static final int MAX_MS = 5000;
    private static final String FILE = System.getProperty("mirrord.stages", "");
    /** Whether stages are timed in this JVM (a constant: the checks compile away when off). */
    public static final boolean ON = !FILE.isEmpty();
    private static final AtomicLongArray[] COUNTS = new AtomicLongArray[NAMES.length];
    private static final AtomicLongArray POLLS = new AtomicLongArray(2);  // polls with records, records

    static {
        for (int i = 0; i < NAMES.length; i++) {
            COUNTS[i] = new AtomicLongArray(MAX_MS + 2);
        }
        if (ON) {
            Thread writer = new Thread(StageClock::writeEverySecond, "mirrord-stage-clock");
            writer.setDaemon(true);
            writer.start();
        }
    }

    private StageClock() {
    }

    /** The record at source {@code offset}, of source timestamp {@code timestampMs}, reached {@code stage} now. */
    public static void reached(int stage, long offset, long timestampMs) {
        if (ON && offset % SAMPLE == 0) {
            long ms = System.currentTimeMillis() - timestampMs;
            COUNTS[stage].incrementAndGet((int) Math.max(0, Math.min(ms, MAX_MS + 1)));
        }
    }

    /** A poll of a source consumer returned {@code records} records (the empty ones are not counted). */
    public static void polled(int records) {
        if (ON && records > 0) {
            POLLS.incrementAndGet(0);
            POLLS.addAndGet(1, records);
        }
    }

    static String json() {
        StringBuilder out = new StringBuilder("{\"sample\":").append(SAMPLE).append(",\"polls\":")
                .append(POLLS.get(0)).append(",\"polled\":").append(POLLS.get(1)).append(",\"ms\":{");
        for (int stage = 0; stage < NAMES.length; stage++) {
            out.append(stage == 0 ? "" : ",").append('"').append(NAMES[stage]).append("\":[");
            for (int ms = 0; ms < COUNTS[stage].length(); ms++) {
                out.append(ms == 0 ? "" : ",").append(COUNTS[stage].get(ms));
            }
            out.append(']');
        }
        return out.append("}}").toString();
    }

    private static void writeEverySecond() {
        Path file = Path.of(FILE);
        Path next = Path.of(FILE + ".next");
        while (true) {
            try {
                Thread.sleep(1000);
                Files.writeString(next, json(), StandardCharsets.UTF_8);
                Files.move(next, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (InterruptedException e) {
                return;
            } catch (IOException e) {
                // a diagnostic: the bench reports the file missing
            }
        }
    }
}
