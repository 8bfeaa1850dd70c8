package io.mirrord.sink;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * The wrapped key: how a record's source timestamp and offset travel through Spark's Kafka sink,
 * which has no timestamp column, to {@link MirrorInterceptor}.
 *
 * <pre>
 * byte 0       version (1)
 * byte 1       flags: bit 0 = the original key was null, bit 1 = the source timestamp is LogAppendTime
 * bytes 2..9   source timestamp, ms since the epoch, big-endian (-1: unknown)
 * bytes 10..17 source offset, big-endian (-1: unknown)
 * bytes 18..   the original key (none if it was null)
 * </pre>
 */
public final class Envelope {
    public static final byte VERSION = 1;
    public static final int HEADER_BYTES = 18;
    static final int NULL_KEY = 1;
    static final int LOG_APPEND_TIME = 2;
    private static final VarHandle LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

    /** {@code timestampType} as Spark's Kafka source gives it: 0 CreateTime, 1 LogAppendTime. */
    public static byte[] wrap(byte[] key, long timestampMs, long sourceOffset, int timestampType) {
        byte[] wrapped = new byte[HEADER_BYTES + (key == null ? 0 : key.length)];
        wrapped[0] = VERSION;
        wrapped[1] = (byte) ((key == null ? NULL_KEY : 0) | (timestampType == 1 ? LOG_APPEND_TIME : 0));
        LONG.set(wrapped, 2, timestampMs);
        LONG.set(wrapped, 10, sourceOffset);
        if (key != null) {
            System.arraycopy(key, 0, wrapped, HEADER_BYTES, key.length);
        }
        return wrapped;
    }

    public static Unwrapped unwrap(byte[] wrapped) {
        if (wrapped == null) {
            throw new EnvelopeError("record key is null, not a mirrord envelope");
        }
        if (wrapped.length < HEADER_BYTES) {
            throw new EnvelopeError("record key has " + wrapped.length + " bytes, shorter than a mirrord envelope");
        }
        if (wrapped[0] != VERSION) {
            throw new EnvelopeError("record key starts with " + wrapped[0] + ", not mirrord envelope version " + VERSION);
        }
        int flags = wrapped[1];
        if ((flags & ~(NULL_KEY | LOG_APPEND_TIME)) != 0) {
            throw new EnvelopeError("mirrord envelope has unknown flags " + flags);
        }
        boolean nullKey = (flags & NULL_KEY) != 0;
        if (nullKey && wrapped.length > HEADER_BYTES) {
            throw new EnvelopeError("mirrord envelope of a null key carries " + (wrapped.length - HEADER_BYTES) + " key bytes");
        }
        byte[] key = nullKey ? null : Arrays.copyOfRange(wrapped, HEADER_BYTES, wrapped.length);
        return new Unwrapped(key, (long) LONG.get(wrapped, 2), (long) LONG.get(wrapped, 10),
                (flags & LOG_APPEND_TIME) != 0);
    }

    /** What {@link #unwrap} found: the original key (null if it was null) and the source's facts. */
    public record Unwrapped(byte[] key, long timestampMs, long sourceOffset, boolean logAppendTime) {
    }

    private Envelope() {
    }
}
