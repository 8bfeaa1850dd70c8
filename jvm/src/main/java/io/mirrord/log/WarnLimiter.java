package io.mirrord.log;

import java.util.concurrent.atomic.AtomicLong;

/** Lets a repeated warning through at most once per interval and counts the ones held back. */
public final class WarnLimiter {
    private final long intervalMs;
    private final AtomicLong nextMs = new AtomicLong(Long.MIN_VALUE);
    private final AtomicLong suppressed = new AtomicLong();

    public WarnLimiter(long intervalMs) {
        this.intervalMs = intervalMs;
    }

    /** -1 if this warning is to be dropped; else how many were dropped since the last one let through. */
    public long admit() {
        long now = System.currentTimeMillis();
        long next = nextMs.get();
        if (now >= next && nextMs.compareAndSet(next, now + intervalMs)) {
            return suppressed.getAndSet(0);
        }
        suppressed.incrementAndGet();
        return -1;
    }
}
