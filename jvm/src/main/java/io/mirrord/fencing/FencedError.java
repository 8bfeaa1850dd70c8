package io.mirrord.fencing;

import io.mirrord.sink.EnvelopeError;

/**
 * A record refused because this host's {@link Fence} lapsed. An {@link Error} for the reason
 * {@link EnvelopeError} is one: Kafka's interceptor chain would send the record anyway on an exception.
 */
public final class FencedError extends Error {
    private static final long serialVersionUID = 1L;

    public FencedError(String message) {
        super(message);
    }
}
