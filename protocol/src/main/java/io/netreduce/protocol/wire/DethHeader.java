package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * Datagram Extended Transport Header (UD), 8 bytes: Q_Key and source QP. Parsed only so that UD traffic
 * is delimited correctly when it passes through.
 */
public final class DethHeader
{
    public static final int QKEY_OFFSET = 0;
    public static final int SRC_QP_OFFSET = 4;
    public static final int LENGTH = 8;

    private DethHeader()
    {
    }

    public static int qkey(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + QKEY_OFFSET, BIG_ENDIAN);
    }

    public static int srcQp(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + SRC_QP_OFFSET, BIG_ENDIAN) & 0xFF_FFFF;
    }
}
