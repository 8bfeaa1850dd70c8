package io.mirrord.fencing;

/**
 * A record refused because this host's {@link Fence} lapsed. An {@link Error}, so that no handler of exceptions
 * between the writer and Spark's task takes it for a record's failure; Spark fails the task with it.
 */
public final class FencedError extends Error {
    private static final long serialVersionUID = 1L;

    public FencedError(String message) {
        super(message);
    }
}
