package io.mirrord.sink;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;

/** A batch of offset syncs about to be written, without those a later sync of the batch shows. */
final class SyncBatch {
    private SyncBatch() {
    }

    /**
     * {@code syncs} (one writer's, in the order emitted) but each that a later one shows: one of the same
     * partition and run (its first source offset and where that record is in the target), with the same
     * earlier runs, runs from before and target incarnation, further along. Those left out are syncs that
     * compaction may remove anyway, since a later sync of their writer follows (docs/decisions.md §7).
     */
    static List<OffsetSync> coalesced(List<OffsetSync> syncs) {
        List<Run> runs = syncs.stream().map(Run::of).toList();
        Map<Run, Integer> last = new HashMap<>();
        for (int i = 0; i < runs.size(); i++) {
            last.put(runs.get(i), i);
        }
        if (last.size() == syncs.size()) {
            return syncs;
        }
        List<OffsetSync> kept = new ArrayList<>(last.size());
        for (int i = 0; i < syncs.size(); i++) {
            if (last.get(runs.get(i)) == i) {
                kept.add(syncs.get(i));
            }
        }
        return kept;
    }

    /**
     * What a sync shows besides how far its run goes. The arrays compare by reference: a run's syncs share
     * them ({@code SyncRuns#emit}), and a new run or a recreation makes new ones.
     */
    private record Run(TopicPartition source, long runStart, long firstDownstream, long[] earlier, long[] before,
                       String targetTopicId) {
        static Run of(OffsetSync s) {
            return new Run(s.source(), s.runStart(), s.downstream() - (s.upstream() - s.runStart()), s.earlier(),
                    s.before(), s.targetTopicId());
        }
    }
}
