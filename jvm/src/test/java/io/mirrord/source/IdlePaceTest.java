package io.mirrord.source;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** An idle stream rests between fetches (docs/decisions.md §9); one with records, or a long fetch wait, never does. */
public class IdlePaceTest {
    @Test
    void aStreamThatFoundNothingForASecondPollsForOneFetchThenRestsTheRestOfTheGap() {
        IdlePace pace = new IdlePace(10);
        assertEquals(1_000, pace.pollMs(0, 5_000));  // not idle yet: a poll waits a second at most
        assertEquals(0, pace.polled(0, false, 600, 4_400));  // nothing for 0.6 s: no rest yet
        assertEquals(1_000, pace.pollMs(600, 4_400));
        assertEquals(0, pace.polled(600, false, 1_000, 4_000));  // exactly a second: idle from the next poll
        assertEquals(15, pace.pollMs(1_000, 4_000));  // the fetch's 10 ms wait and its way back
        assertEquals(85, pace.polled(1_000, false, 1_015, 3_985));  // one fetch per 100 ms
        assertEquals(50, pace.polled(1_100, false, 1_150, 50));  // never past the caller's wait
        assertEquals(0, pace.polled(1_200, false, 1_320, 3_000));  // a poll that took the whole gap
    }

    @Test
    void aPollThatFindsRecordsEndsTheRestAndTheNextQuietSecondBeginsAgain() {
        IdlePace pace = new IdlePace(10);
        pace.polled(0, false, 1_000, 4_000);
        assertEquals(15, pace.pollMs(1_000, 4_000));
        assertEquals(0, pace.polled(1_000, true, 1_005, 3_995));  // a record: full polls again
        assertEquals(1_000, pace.pollMs(1_005, 3_995));
        assertEquals(0, pace.polled(1_005, false, 1_500, 3_500));
        assertEquals(1_000, pace.pollMs(1_500, 3_500));
        assertEquals(15, pace.pollMs(2_005, 3_000));
    }

    @Test
    void aBrokerThatHoldsTheFetchItselfIsPolledAsBefore() {
        IdlePace pace = new IdlePace(500);  // Kafka's default fetch.max.wait.ms, or fetch.min.bytes 1 with it
        pace.polled(0, false, 5_000, 0);
        assertEquals(5_000, pace.pollMs(5_000, 5_000));
        assertEquals(0, pace.polled(5_000, false, 10_000, 5_000));
    }
}
