package io.mirrord.sink;

/**
 * A record key that is not an {@link Envelope}.
 *
 * <p>Deliberately an {@link Error}, not an exception: Kafka's {@code ProducerInterceptors.onSend}
 * catches {@code Exception} from an interceptor, logs it and sends the record as it was, which here
 * would write the envelope into the target topic as the record's key. An {@code Error} passes
 * through {@code KafkaProducer.send()} instead, so Spark's task fails and nothing is written. Scala's
 * {@code NonFatal} (which Spark's executor uses) treats it as an ordinary task failure, not as a
 * reason to stop the JVM.
 */
public final class EnvelopeError extends Error {
    private static final long serialVersionUID = 1L;

    public EnvelopeError(String message) {
        super(message);
    }

    public EnvelopeError(String message, Throwable cause) {
        super(message, cause);
    }
}
