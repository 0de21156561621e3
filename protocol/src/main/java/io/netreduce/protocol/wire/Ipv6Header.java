package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * IPv6 fixed header (RFC 8200). RoCEv2 puts UDP directly after it; extension headers are not followed.
 */
public final class Ipv6Header
{
    public static final int VERSION_CLASS_FLOW_OFFSET = 0;
    public static final int PAYLOAD_LENGTH_OFFSET = 4;
    public static final int NEXT_HEADER_OFFSET = 6;
    public static final int HOP_LIMIT_OFFSET = 7;
    public static final int SRC_OFFSET = 8;
    public static final int DST_OFFSET = 24;
    public static final int ADDRESS_LENGTH = 16;
    public static final int LENGTH = 40;

    private Ipv6Header()
    {
    }

    public static int version(final DirectBuffer buffer, final int offset)
    {
        return (buffer.getByte(offset) >>> 4) & 0xF;
    }

    public static int trafficClass(final DirectBuffer buffer, final int offset)
    {
        return (buffer.getShort(offset, BIG_ENDIAN) >>> 4) & 0xFF;
    }

    public static int ecn(final DirectBuffer buffer, final int offset)
    {
        return trafficClass(buffer, offset) & 0x3;
    }

    public static int flowLabel(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset, BIG_ENDIAN) & 0xFFFFF;
    }

    public static int payloadLength(final DirectBuffer buffer, final int offset)
    {
        return buffer.getShort(offset + PAYLOAD_LENGTH_OFFSET, BIG_ENDIAN) & 0xFFFF;
    }

    public static int nextHeader(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + NEXT_HEADER_OFFSET) & 0xFF;
    }

    public static int hopLimit(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + HOP_LIMIT_OFFSET) & 0xFF;
    }

    /**
     * Write the fixed header; addresses are copied from 16-byte arrays.
     */
    public static void write(
        final MutableDirectBuffer buffer,
        final int offset,
        final int trafficClass,
        final int flowLabel,
        final int payloadLength,
        final int nextHeader,
        final int hopLimit,
        final byte[] src,
        final byte[] dst)
    {
        buffer.putInt(offset, (6 << 28) | ((trafficClass & 0xFF) << 20) | (flowLabel & 0xFFFFF), BIG_ENDIAN);
        buffer.putShort(offset + PAYLOAD_LENGTH_OFFSET, (short)payloadLength, BIG_ENDIAN);
        buffer.putByte(offset + NEXT_HEADER_OFFSET, (byte)nextHeader);
        buffer.putByte(offset + HOP_LIMIT_OFFSET, (byte)hopLimit);
        buffer.putBytes(offset + SRC_OFFSET, src, 0, ADDRESS_LENGTH);
        buffer.putBytes(offset + DST_OFFSET, dst, 0, ADDRESS_LENGTH);
    }

    public static void payloadLength(final MutableDirectBuffer buffer, final int offset, final int length)
    {
        buffer.putShort(offset + PAYLOAD_LENGTH_OFFSET, (short)length, BIG_ENDIAN);
    }
}
