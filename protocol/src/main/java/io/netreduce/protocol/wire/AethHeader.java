package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * ACK Extended Transport Header, 4 bytes: syndrome (8 bits) and MSN (24 bits).
 * <p>
 * Syndrome bits 7..5 say ACK (000), RNR NAK (001) or NAK (011); for an ACK bits 4..0 carry the credit count,
 * for a NAK they carry the NAK code (0 PSN sequence error, 1 invalid request, 2 remote access error,
 * 3 remote operational error, 4 invalid RD request).
 */
public final class AethHeader
{
    public static final int SYNDROME_OFFSET = 0;
    public static final int MSN_OFFSET = 0;
    public static final int LENGTH = 4;

    public static final int TYPE_ACK = 0;
    public static final int TYPE_RNR_NAK = 1;
    public static final int TYPE_NAK = 3;

    public static final int NAK_PSN_SEQUENCE_ERROR = 0;
    public static final int NAK_INVALID_REQUEST = 1;
    public static final int NAK_REMOTE_ACCESS_ERROR = 2;
    public static final int NAK_REMOTE_OPERATIONAL_ERROR = 3;

    /** Credit count value meaning "end-to-end credits not valid" as RoCE responders send. */
    public static final int CREDITS_INVALID = 0x1F;

    private AethHeader()
    {
    }

    public static int syndrome(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + SYNDROME_OFFSET) & 0xFF;
    }

    public static int type(final int syndrome)
    {
        return (syndrome >>> 5) & 0x3;
    }

    public static int code(final int syndrome)
    {
        return syndrome & 0x1F;
    }

    public static int syndrome(final int type, final int code)
    {
        return ((type & 0x3) << 5) | (code & 0x1F);
    }

    public static int msn(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + MSN_OFFSET, BIG_ENDIAN) & 0xFF_FFFF;
    }

    public static void write(final MutableDirectBuffer buffer, final int offset, final int syndrome, final int msn)
    {
        buffer.putInt(offset, ((syndrome & 0xFF) << 24) | (msn & 0xFF_FFFF), BIG_ENDIAN);
    }
}
