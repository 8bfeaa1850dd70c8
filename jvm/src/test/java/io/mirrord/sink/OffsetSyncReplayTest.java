package io.mirrord.sink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.StringReader;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;

public class OffsetSyncReplayTest {
    static String replay(String input) throws IOException {
        StringWriter out = new StringWriter();
        OffsetSyncReplay.replay(new BufferedReader(new StringReader(input)), out);
        return out.toString();
    }

    @Test
    void eachHistoryPrintsTheSyncsItsWritersEmittedInOrderWithTheirDelayedOnesAtTheEnd() throws IOException {
        String out = replay(String.join("\n",
                "h 100",
                "a x 0 0", "a x 1 1", "a y 5 2", "a x 2 3",  // y wrote between: x's run ends at 1
                "f y",  // y's thread: nothing delayed (its one record was a first sync)
                "a x 3 4",
                "e",
                "h 2",
                "a x 0 0", "a x 1 1", "r x",  // the delayed 1→1 emitted when the run is reset
                "a x 3 2",
                "e",
                "h 100",
                "x x A", "a x 0 0", "a x 1 1",  // x knows the target topic's id A
                "x x B",  // recreated: the delayed 1→1 emitted under A, the run carried as one from before
                "a x 0 0",
                "e", ""));
        // after the fourth field, the writer's earlier runs the sync carries (UP,DOWN,RUNSTART triples); then the
        // target topic's id the sync names (empty: none known)
        assertEquals("x:0:0:0::: y:5:2:5::: x:1:1:0::: x:2:3:2:1,1,0:: x:3:4:2:1,1,0::\n"
                + "x:0:0:0::: x:1:1:0::: x:3:2:3:1,1,0::\n"
                + "x:0:0:0::A: x:1:1:0::A: x:0:0:0::B:1,1,0\n", out);
    }

    @Test
    void aHistoryWithoutSyncsPrintsAnEmptyLine() throws IOException {
        assertEquals("\n", replay("h 5\ne\n"));
    }

    @Test
    void anUnreadableLineIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> replay("h 5\na x one 0\n"));
        assertThrows(IllegalArgumentException.class, () -> replay("h 5\nz\n"));
    }
}
