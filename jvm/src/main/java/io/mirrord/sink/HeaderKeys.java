package io.mirrord.sink;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Header keys as the producer wants them ({@code String}s), made once per distinct key rather than once per
 * header: a task's rows carry few distinct keys. The row's bytes are copied before they are kept (they point
 * into a row Spark fills again); past {@value #KEPT} distinct keys the memory starts afresh.
 */
final class HeaderKeys {
    static final int KEPT = 256;
    private final Map<UTF8String, String> keys = new HashMap<>();

    String of(UTF8String key) {
        String known = keys.get(key);
        if (known == null) {
            if (keys.size() >= KEPT) {
                keys.clear();
            }
            known = key.toString();
            keys.put(key.copy(), known);
        }
        return known;
    }

    /** For tests: the keys remembered, as their bytes read now. */
    Set<String> kept() {
        Set<String> kept = new HashSet<>();
        keys.keySet().forEach(k -> kept.add(k.toString()));
        return kept;
    }
}
