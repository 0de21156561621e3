package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * UDP header (RFC 768). RoCEv2 uses destination port 4791 and, over IPv4, checksum 0.
 */
public final class UdpHeader
{
    public static final int SRC_PORT_OFFSET = 0;
    public static final int DST_PORT_OFFSET = 2;
    public static final int LENGTH_OFFSET = 4;
    public static final int CHECKSUM_OFFSET = 6;
    public static final int LENGTH = 8;

    /** IANA port of RoCEv2. */
    public static final int ROCE_V2_PORT = 4791;

    private UdpHeader()
    {
    }

    public static int srcPort(final DirectBuffer buffer, final int offset)
    {
        return buffer.getShort(offset + SRC_PORT_OFFSET, BIG_ENDIAN) & 0xFFFF;
    }

    public static int dstPort(final DirectBuffer buffer, final int offset)
    {
        return buffer.getShort(offset + DST_PORT_OFFSET, BIG_ENDIAN) & 0xFFFF;
    }

    /**
     * @return the UDP length field: header plus payload, in bytes.
     */
    public static int length(final DirectBuffer buffer, final int offset)
    {
        return buffer.getShort(offset + LENGTH_OFFSET, BIG_ENDIAN) & 0xFFFF;
    }

    public static int checksum(final DirectBuffer buffer, final int offset)
    {
        return buffer.getShort(offset + CHECKSUM_OFFSET, BIG_ENDIAN) & 0xFFFF;
    }

    public static void write(
        final MutableDirectBuffer buffer, final int offset, final int srcPort, final int dstPort, final int length)
    {
        buffer.putShort(offset + SRC_PORT_OFFSET, (short)srcPort, BIG_ENDIAN);
        buffer.putShort(offset + DST_PORT_OFFSET, (short)dstPort, BIG_ENDIAN);
        buffer.putShort(offset + LENGTH_OFFSET, (short)length, BIG_ENDIAN);
        buffer.putShort(offset + CHECKSUM_OFFSET, (short)0, BIG_ENDIAN);
    }

    public static void length(final MutableDirectBuffer buffer, final int offset, final int length)
    {
        buffer.putShort(offset + LENGTH_OFFSET, (short)length, BIG_ENDIAN);
    }

    public static void checksum(final MutableDirectBuffer buffer, final int offset, final int checksum)
    {
        buffer.putShort(offset + CHECKSUM_OFFSET, (short)checksum, BIG_ENDIAN);
    }
}
