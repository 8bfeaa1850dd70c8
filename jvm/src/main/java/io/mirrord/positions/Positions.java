package io.mirrord.positions;

import io.mirrord.log.JsonText;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one owner of every source partition's position (docs/decisions.md §10), on the driver: the offset
 * after the contiguous prefix of the partition's records that the target acknowledged, in the partition's
 * current incarnation. It is the only path that commits to the source group ({@link GroupCommitter}), and
 * what the supervisor reads for lag, STATUS and resume.
 *
 * <p>Two inputs move a position forward, both only within the partition's current incarnation: the
 * writers' acknowledgements ({@link #acknowledged}, tagged with the incarnation the record was read
 * in), and the end of a batch Spark committed ({@link #batchEnded}: every record below it was acknowledged,
 * or never needed to be: transaction markers, records a transform dropped). A new incarnation begins when
 * the source goes back (a batch ends below the position: the topic was recreated under the reader) or the
 * topic's id changes (recreated, perhaps past where the old one was read, which offsets alone cannot tell);
 * its position starts unknown (nothing is committed for it) or at that batch's end, and whatever the old
 * incarnation still acknowledges is ignored. So a position never passes a record of the current incarnation
 * that the target does not hold. A topic seen deleted keeps its partitions and last id (nothing of it is
 * committed meanwhile), so one recreated within seconds is still seen as a new incarnation.
 */
public final class Positions {
    private static final Logger log = LoggerFactory.getLogger(Positions.class);
    /** How long a deleted topic's partitions are kept for its return under another id. */
    static final long DELETED_KEPT_MS = 600_000;
    /** The driver's owner. */
    public static final Positions DRIVER = new Positions();

    private final Map<TopicPartition, Entry> entries = new HashMap<>();  // guarded by this
    private final Map<String, String> ids = new HashMap<>();  // each source topic's id as last asked; guarded by this
    private boolean idsWanted;  // partitions read from their start since the last look at the ids; guarded by this

    static final class Entry {
        long incarnation;
        long next = -1;  // -1: unknown in this incarnation, nothing to commit
        long committed = -1;
        String topicId;  // null: not known yet
        boolean rewound;  // the topic's id changed: the next batch reads the partition from its start
        long deletedAt = -1;  // when the topic was seen deleted (nothing committed while it is); -1: it exists
        boolean adopting;  // read from its start: the topic's next id is this reading's, and nothing is committed before
    }

    private Entry entry(TopicPartition tp) {
        return entries.computeIfAbsent(tp, k -> new Entry());
    }

    /** The incarnation a batch being planned reads each of these partitions in. */
    public synchronized Map<TopicPartition, Long> incarnations(Collection<TopicPartition> partitions) {
        Map<TopicPartition, Long> incarnations = new HashMap<>();
        for (TopicPartition tp : partitions) {
            incarnations.put(tp, entry(tp).incarnation);
        }
        return incarnations;
    }

    /** The target acknowledged the partition's records below {@code next}, all read in {@code incarnation}. */
    public synchronized void acknowledged(TopicPartition tp, long incarnation, long next) {
        Entry e = entries.get(tp);
        if (e != null && e.incarnation == incarnation && next > e.next) {
            e.next = next;
        }
    }

    /**
     * Spark committed a batch that read each partition up to {@code ends}, in the incarnations {@code planned}
     * gave it when the batch was planned; partitions not planned here (read by a reader that found them on
     * its own, or a batch of an earlier run) are left to their acknowledgements and the next batch.
     */
    public synchronized void batchEnded(Map<TopicPartition, Long> ends, Map<TopicPartition, Long> planned) {
        ends.forEach((tp, end) -> {
            Long incarnation = planned.get(tp);
            Entry e = entries.get(tp);
            if (incarnation == null || e == null || incarnation != e.incarnation || end < 0) {
                return;
            }
            if (end < e.next) {  // the source went back under the reader: a new incarnation, read to `end`
                e.incarnation++;
                log.warn("{}: the batch ended at offset {}, below the acknowledged {} (the topic was recreated, or "
                        + "a lost task ran again from its batch's start): its position starts again there", tp, end,
                        e.next);
            }
            e.next = end;
        });
    }

    /**
     * The source's topic ids now: a topic whose id changed was recreated, and each of its partitions begins a
     * new incarnation with its position unknown. A position committed before its topic's first id was known
     * (the look runs on a thread of its own) is committed again, naming it.
     */
    public synchronized void topicIds(Map<String, String> ids) {
        this.ids.putAll(ids);
        entries.forEach((tp, e) -> {
            String id = ids.get(tp.topic());
            if (id == null) {
                return;
            }
            if (e.topicId != null && !e.topicId.equals(id) && !e.adopting) {
                e.incarnation++;
                e.next = -1;
                e.committed = -1;
                e.rewound = true;
                log.warn("{}: the topic was recreated on the source (id {} is now {}): read again from its start",
                        tp, e.topicId, id);
            }
            if (e.topicId == null && e.committed >= 0) {  // committed before the id was known: again, naming it
                e.committed = -1;
            }
            e.topicId = id;
            e.deletedAt = -1;
            e.adopting = false;
        });
    }

    /**
     * These partitions are read from their start now, in whatever incarnation their topic has now (new, planned
     * again from their start, or found recreated by a reader): a new incarnation, position unknown until a batch
     * planned in it is acknowledged. A topic whose id is not in {@code ids} (asked before the first offsets:
     * {@link #idsAsked}) takes the owner's next id as this reading's, not as a recreation, and nothing is committed
     * before then: every commit names its incarnation (a resume trusts one without an id only where it is ahead).
     */
    public synchronized void readFromStart(Collection<TopicPartition> partitions, Map<String, String> ids) {
        idsWanted |= !partitions.isEmpty();
        for (TopicPartition tp : partitions) {
            Entry e = entry(tp);
            e.incarnation++;
            e.next = -1;
            e.committed = -1;
            e.adopting = true;
            e.rewound = false;
            e.deletedAt = -1;
        }
        idsAsked(partitions, ids);
    }

    /**
     * The ids of these partitions' topics, asked for before a batch planned their offsets: a topic recreated since
     * is seen by its new id at the owner's next look, not taken for the first (docs/decisions.md §10).
     */
    public synchronized void idsAsked(Collection<TopicPartition> partitions, Map<String, String> asked) {
        for (TopicPartition tp : partitions) {
            String id = asked.get(tp.topic());
            Entry e = entry(tp);
            if (id != null && (e.topicId == null || e.adopting)) {
                e.topicId = id;
                e.adopting = false;
                ids.put(tp.topic(), id);
            }
        }
    }

    /** The topics of those of {@code partitions} whose topic's id is not known yet. */
    public synchronized Set<String> withoutIds(Collection<TopicPartition> partitions) {
        Set<String> topics = new HashSet<>();
        for (TopicPartition tp : partitions) {
            Entry e = entries.get(tp);
            if (e == null || e.topicId == null || e.adopting) {
                topics.add(tp.topic());
            }
        }
        return topics;
    }

    /**
     * Whether partitions were read from their start since the last call: their topics' ids are to be asked for
     * now, not at the next regular look. Until then the id the owner sees next is taken as theirs, so a topic
     * recreated meanwhile (in the first seconds of a query, say) would not be seen as recreated.
     */
    public synchronized boolean takeIdsWanted() {
        boolean wanted = idsWanted;
        idsWanted = false;
        return wanted;
    }

    /** The ids known of these partitions' topics (a batch's plan carries them to its tasks). */
    public synchronized Map<String, String> topicIdsOf(Collection<TopicPartition> partitions) {
        Map<String, String> known = new HashMap<>();
        for (TopicPartition tp : partitions) {
            String id = ids.get(tp.topic());
            if (id != null) {
                known.put(tp.topic(), id);
            }
        }
        return known;
    }

    /** Those of {@code partitions} recreated since last asked: the next batch reads them from their start. */
    public synchronized Set<TopicPartition> takeRewound(Collection<TopicPartition> partitions) {
        Set<TopicPartition> rewound = new HashSet<>();
        for (TopicPartition tp : partitions) {
            Entry e = entries.get(tp);
            if (e != null && e.rewound) {
                e.rewound = false;
                rewound.add(tp);
            }
        }
        return rewound;
    }

    /**
     * These topics were not found on the source at {@code nowMs}: nothing of them is committed (a commit would be
     * refused), but their partitions keep their incarnation and the topic's last id, so a topic recreated before
     * anyone looked again is seen by its new id (docs/decisions.md §10). Those deleted for longer than
     * {@link #DELETED_KEPT_MS} are forgotten: a topic back after that was listed gone meanwhile by every reader.
     */
    public synchronized void deleted(Collection<String> topics, long nowMs) {
        entries.forEach((tp, e) -> {
            if (topics.contains(tp.topic()) && e.deletedAt < 0) {
                e.deletedAt = nowMs;
            }
        });
        entries.values().removeIf(e -> e.deletedAt >= 0 && nowMs - e.deletedAt > DELETED_KEPT_MS);
        Set<String> kept = topics();
        ids.keySet().removeIf(topic -> topics.contains(topic) && !kept.contains(topic));
    }

    /** The topics whose ids are worth asking for: those with a position here, deleted ones too. */
    public synchronized Set<String> topics() {
        Set<String> topics = new HashSet<>();
        entries.keySet().forEach(tp -> topics.add(tp.topic()));
        return topics;
    }

    /**
     * What has moved since the last commit: a position known in its incarnation, with the topic's id as the
     * commit's metadata ({@link #METADATA_PREFIX}), which a resume checks against the topic's id then.
     */
    public synchronized Map<TopicPartition, OffsetAndMetadata> uncommitted() {
        return known(false);
    }

    /** Every known position, moved or not: committed again before the group's offsets expire. */
    public synchronized Map<TopicPartition, OffsetAndMetadata> known() {
        return known(true);
    }

    private Map<TopicPartition, OffsetAndMetadata> known(boolean all) {
        Map<TopicPartition, OffsetAndMetadata> chosen = new HashMap<>();
        entries.forEach((tp, e) -> {
            if (e.next >= 0 && (all || e.next != e.committed) && e.deletedAt < 0 && !e.adopting) {
                chosen.put(tp, new OffsetAndMetadata(e.next, e.topicId == null ? "" : METADATA_PREFIX + e.topicId + "\0"));
            }
        });
        return chosen;
    }

    /**
     * The metadata is this prefix, the topic's id, and a NUL, as confluent-kafka's own commits store theirs:
     * confluent-kafka (2.16.1) copies fetched metadata up to a NUL, so without one the supervisor read bytes
     * past its end (a topic id with garbage after it, or an undecodable string).
     */
    public static final String METADATA_PREFIX = "mirrord topic-id=";

    /** These commits reached the group. */
    public synchronized void committed(Map<TopicPartition, OffsetAndMetadata> offsets) {
        offsets.forEach((tp, o) -> {
            Entry e = entries.get(tp);
            if (e != null) {
                e.committed = o.offset();
            }
        });
    }

    /** The known positions, {@code {"topic":{"0":42}}}, for the supervisor (lag, STATUS). */
    public synchronized String json() {
        Map<String, Map<Integer, Long>> byTopic = new TreeMap<>();
        entries.forEach((tp, e) -> {
            if (e.next >= 0) {
                byTopic.computeIfAbsent(tp.topic(), t -> new TreeMap<>()).put(tp.partition(), e.next);
            }
        });
        StringBuilder json = new StringBuilder("{");
        String sep = "";
        for (Map.Entry<String, Map<Integer, Long>> t : byTopic.entrySet()) {
            json.append(sep);
            JsonText.appendString(json, t.getKey());
            json.append(":{");
            String inner = "";
            for (Map.Entry<Integer, Long> p : t.getValue().entrySet()) {
                json.append(inner).append('"').append(p.getKey()).append("\":").append(p.getValue());
                inner = ",";
            }
            json.append('}');
            sep = ",";
        }
        return json.append('}').toString();
    }
}
