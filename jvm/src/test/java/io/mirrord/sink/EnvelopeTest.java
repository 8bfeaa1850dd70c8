package io.mirrord.sink;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HexFormat;
import org.junit.jupiter.api.Test;

class EnvelopeTest {
    private static final HexFormat HEX = HexFormat.of();

    @Test
    void wrapLaysOutVersionFlagsTimestampOffsetThenKey() {
        byte[] wrapped = Envelope.wrap(new byte[] {(byte) 0xab, 0x00}, 0x0102030405060708L, 0x1112131415161718L, 0);
        assertEquals("01" + "00" + "0102030405060708" + "1112131415161718" + "ab00", HEX.formatHex(wrapped));
    }

    @Test
    void nullKeySetsFlagBit0AndCarriesNoKeyBytes() {
        byte[] wrapped = Envelope.wrap(null, 1000, 5, 0);
        assertEquals(Envelope.HEADER_BYTES, wrapped.length);
        assertEquals(1, wrapped[1]);
        Envelope.Unwrapped u = Envelope.unwrap(wrapped);
        assertNull(u.key());
        assertEquals(1000, u.timestampMs());
        assertEquals(5, u.sourceOffset());
        assertFalse(u.logAppendTime());
    }

    @Test
    void emptyKeyStaysEmptyNotNull() {
        Envelope.Unwrapped u = Envelope.unwrap(Envelope.wrap(new byte[0], 1, 2, 0));
        assertArrayEquals(new byte[0], u.key());
    }

    @Test
    void binaryKeyRoundTripsByteForByte() {
        byte[] key = new byte[256];
        for (int i = 0; i < key.length; i++) {
            key[i] = (byte) i;
        }
        Envelope.Unwrapped u = Envelope.unwrap(Envelope.wrap(key, Long.MAX_VALUE, Long.MAX_VALUE - 1, 0));
        assertArrayEquals(key, u.key());
        assertEquals(Long.MAX_VALUE, u.timestampMs());
        assertEquals(Long.MAX_VALUE - 1, u.sourceOffset());
    }

    @Test
    void logAppendTimeSetsFlagBit1() {
        byte[] wrapped = Envelope.wrap(null, 7, 8, 1);
        assertEquals(3, wrapped[1]);
        assertTrue(Envelope.unwrap(wrapped).logAppendTime());
        assertFalse(Envelope.unwrap(Envelope.wrap(new byte[] {1}, 7, 8, 0)).logAppendTime());
    }

    @Test
    void unknownTimestampAndOffsetRoundTripAsMinusOne() {
        Envelope.Unwrapped u = Envelope.unwrap(Envelope.wrap(null, -1, -1, 0));
        assertEquals(-1, u.timestampMs());
        assertEquals(-1, u.sourceOffset());
    }

    @Test
    void nullShortOrWrongVersionKeysAreEnvelopeErrors() {
        assertThrows(EnvelopeError.class, () -> Envelope.unwrap(null));
        assertThrows(EnvelopeError.class, () -> Envelope.unwrap(new byte[Envelope.HEADER_BYTES - 1]));
        byte[] wrongVersion = Envelope.wrap(new byte[] {1}, 1, 2, 0);
        wrongVersion[0] = 2;
        assertThrows(EnvelopeError.class, () -> Envelope.unwrap(wrongVersion));
        assertThrows(EnvelopeError.class, () -> Envelope.unwrap("plain key, not an envelope".getBytes()));
    }

    @Test
    void unknownFlagsOrKeyBytesAfterANullKeyAreEnvelopeErrors() {
        byte[] unknownFlag = Envelope.wrap(new byte[] {1}, 1, 2, 0);
        unknownFlag[1] = 4;
        assertThrows(EnvelopeError.class, () -> Envelope.unwrap(unknownFlag));
        byte[] nullWithBytes = Envelope.wrap(new byte[] {1}, 1, 2, 0);
        nullWithBytes[1] = 1;
        assertThrows(EnvelopeError.class, () -> Envelope.unwrap(nullWithBytes));
    }

    @Test
    void envelopeErrorIsAnErrorSoKafkaInterceptorsDoNotSwallowIt() {
        assertFalse(Exception.class.isAssignableFrom(EnvelopeError.class));
        assertTrue(Error.class.isAssignableFrom(EnvelopeError.class));
    }

    @Test
    void udfWrapsWithNullTimestampTypeAsCreateTime() throws Exception {
        EnvelopeUdf udf = new EnvelopeUdf();
        assertArrayEquals(Envelope.wrap(new byte[] {9}, 1000, 5, 0), udf.call(new byte[] {9}, 1000L, 5L, null));
        assertArrayEquals(Envelope.wrap(null, 1000, 5, 1), udf.call(null, 1000L, 5L, 1));
        assertArrayEquals(Envelope.wrap(null, -1, -1, 0), udf.call(null, null, null, 0));
    }
}
