package io.mirrord.sink;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TransactionListing;

/**
 * Before an exactly-once query starts (docs/decisions.md §12): every producer that ever wrote this flow's
 * streams is fenced by the broker, {@code Admin.fenceProducers} on each transactional id of the flow, those
 * the target knows ({@code listTransactions}: a layout with more streams, an earlier {@code num.streams})
 * and those the new layout will use. A fenced producer's open transaction is aborted and it can never
 * commit again: a frozen host that wakes, a host cut off that heals, a Spark task the driver lost. Only
 * then are the committed positions read, so no zombie can commit after them.
 */
public final class Zombies {
    private Zombies() {
    }

    /**
     * Fences the ids {@code <prefix>-<n>} the target knows and those of streams 0 to {@code streams - 1};
     * returns them, sorted. {@code adminConfig}: the target's client properties.
     */
    public static List<String> fence(Map<String, String> adminConfig, String prefix, int streams, long timeoutMs)
            throws ExecutionException, InterruptedException, TimeoutException {
        Map<String, Object> config = new HashMap<>(adminConfig);
        config.putIfAbsent(AdminClientConfig.CLIENT_ID_CONFIG, "mirrord-fence");
        Pattern ours = Pattern.compile(Pattern.quote(prefix) + "-\\d+");
        TreeSet<String> ids = new TreeSet<>();
        for (int i = 0; i < streams; i++) {
            ids.add(MirrorWriter.transactionalId(prefix, i));
        }
        try (Admin admin = Admin.create(config)) {
            for (TransactionListing listing : admin.listTransactions().all().get(timeoutMs, TimeUnit.MILLISECONDS)) {
                if (ours.matcher(listing.transactionalId()).matches()) {
                    ids.add(listing.transactionalId());
                }
            }
            admin.fenceProducers(ids).all().get(timeoutMs, TimeUnit.MILLISECONDS);
        }
        return new ArrayList<>(ids);
    }
}
