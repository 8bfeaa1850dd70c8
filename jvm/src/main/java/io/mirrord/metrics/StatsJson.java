package io.mirrord.metrics;

import io.mirrord.log.JsonText;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.LongAdder;

/** A {@link Stats}' counts as JSON, in one object, keys sorted. */
final class StatsJson {
    private StatsJson() {
    }

    /**
     * The counts so far: {@code {"topics":{"t":{"records":3,"bytes":42}},"filtered":{"transform":{"source topic":7}},
     * "latency":{"bounds":[0.005,...,3600],"counts":[16 counts, not cumulative, the last one above 3600 s],
     * "sum":1.234},"syncs":5,"sync_errors":0,"transactions":{"committed":9,"aborted":0},"transaction_seconds":{a
     * histogram as latency's},"commit_seconds":{one more},"positions":{"source topic":{"0":42}}}}, a position being
     * what this Stats saw acknowledged (in the partition's latest incarnation).
     */
    static String of(Stats stats) {
        StringBuilder json = new StringBuilder(256).append("{\"topics\":{");
        String separator = "";
        for (Map.Entry<String, Stats.Topic> e : new TreeMap<>(stats.topics).entrySet()) {
            json.append(separator);
            JsonText.appendString(json, e.getKey());
            json.append(":{\"records\":").append(e.getValue().records.sum())
                    .append(",\"bytes\":").append(e.getValue().bytes.sum()).append('}');
            separator = ",";
        }
        json.append("},\"filtered\":{");
        separator = "";
        for (Map.Entry<String, Map<String, LongAdder>> t : new TreeMap<>(stats.filtered).entrySet()) {
            json.append(separator);
            JsonText.appendString(json, t.getKey());
            String inner = ":{";
            for (Map.Entry<String, LongAdder> e : new TreeMap<>(t.getValue()).entrySet()) {
                json.append(inner);
                JsonText.appendString(json, e.getKey());
                json.append(':').append(e.getValue().sum());
                inner = ",";
            }
            json.append(inner.equals(":{") ? ":{}" : "}");
            separator = ",";
        }
        stats.latency.appendJson(json.append("},\"latency\":"));
        json.append(",\"syncs\":").append(stats.syncs.sum())
                .append(",\"sync_errors\":").append(stats.syncErrors.sum())
                .append(",\"transactions\":{\"committed\":").append(stats.transactions.sum())
                .append(",\"aborted\":").append(stats.aborted.sum()).append('}');
        stats.transactionTimes.appendJson(json.append(",\"transaction_seconds\":"));
        stats.commitTimes.appendJson(json.append(",\"commit_seconds\":"));
        json.append(",\"positions\":{");
        separator = "";
        for (Map.Entry<String, Map<Integer, AckedPosition>> t : new TreeMap<>(stats.positions).entrySet()) {
            String inner = ":{";
            for (Map.Entry<Integer, AckedPosition> e : new TreeMap<>(t.getValue()).entrySet()) {
                long next = e.getValue().get();
                if (next < 0) {
                    continue;  // nothing acknowledged yet
                }
                if (inner.equals(":{")) {
                    json.append(separator);
                    JsonText.appendString(json, t.getKey());
                    separator = ",";
                }
                json.append(inner).append('"').append(e.getKey()).append("\":").append(next);
                inner = ",";
            }
            if (!inner.equals(":{")) {
                json.append('}');
            }
        }
        return json.append("}}").toString();
    }
}
