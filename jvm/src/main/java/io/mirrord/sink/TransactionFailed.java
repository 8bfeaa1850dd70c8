package io.mirrord.sink;

/** An exactly-once transaction that could not commit; the query fails and the next start resumes from the target. */
public final class TransactionFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    TransactionFailed(String message, Throwable cause) {
        super(message, cause);
    }
}
