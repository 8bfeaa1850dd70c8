package io.mirrord.sink;

import org.apache.spark.sql.api.java.UDF4;

/**
 * {@code mirrord_envelope(key, unix_millis(timestamp), offset, timestampType)}: the Spark SQL side of
 * {@link Envelope}. Registered from Python with
 * {@code spark.udf.registerJavaFunction("mirrord_envelope", "io.mirrord.sink.EnvelopeUdf", BinaryType())}.
 */
public final class EnvelopeUdf implements UDF4<byte[], Long, Long, Integer, byte[]> {
    private static final long serialVersionUID = 1L;

    @Override
    public byte[] call(byte[] key, Long timestampMs, Long offset, Integer timestampType) {
        return Envelope.wrap(key, timestampMs == null ? -1L : timestampMs, offset == null ? -1L : offset,
                timestampType == null ? 0 : timestampType);
    }
}
