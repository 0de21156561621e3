package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * IPv4 header (RFC 791). Options are allowed; their length comes from IHL.
 */
public final class Ipv4Header
{
    public static final int VERSION_IHL_OFFSET = 0;
    public static final int TOS_OFFSET = 1;
    public static final int TOTAL_LENGTH_OFFSET = 2;
    public static final int IDENTIFICATION_OFFSET = 4;
    public static final int FLAGS_FRAGMENT_OFFSET = 6;
    public static final int TTL_OFFSET = 8;
    public static final int PROTOCOL_OFFSET = 9;
    public static final int CHECKSUM_OFFSET = 10;
    public static final int SRC_OFFSET = 12;
    public static final int DST_OFFSET = 16;
    public static final int MIN_LENGTH = 20;

    public static final int PROTOCOL_UDP = 17;
    public static final int FLAG_DONT_FRAGMENT = 0x4000;
    private static final int FLAG_MORE_FRAGMENTS = 0x2000;
    private static final int FRAGMENT_OFFSET_MASK = 0x1FFF;
    /** ECN codepoint "congestion experienced" in the low two bits of TOS. */
    public static final int ECN_CE = 3;

    private Ipv4Header()
    {
    }

    public static int version(final DirectBuffer buffer, final int offset)
    {
        return (buffer.getByte(offset + VERSION_IHL_OFFSET) >>> 4) & 0xF;
    }

    /**
     * @return header length in bytes (IHL * 4).
     */
    public static int headerLength(final DirectBuffer buffer, final int offset)
    {
        return (buffer.getByte(offset + VERSION_IHL_OFFSET) & 0xF) * 4;
    }

    public static int tos(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + TOS_OFFSET) & 0xFF;
    }

    public static int ecn(final DirectBuffer buffer, final int offset)
    {
        return tos(buffer, offset) & 0x3;
    }

    public static int totalLength(final DirectBuffer buffer, final int offset)
    {
        return buffer.getShort(offset + TOTAL_LENGTH_OFFSET, BIG_ENDIAN) & 0xFFFF;
    }

    public static boolean isFragment(final DirectBuffer buffer, final int offset)
    {
        final int flags = buffer.getShort(offset + FLAGS_FRAGMENT_OFFSET, BIG_ENDIAN) & 0xFFFF;
        return (flags & (FLAG_MORE_FRAGMENTS | FRAGMENT_OFFSET_MASK)) != 0;
    }

    public static int ttl(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + TTL_OFFSET) & 0xFF;
    }

    public static int protocol(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + PROTOCOL_OFFSET) & 0xFF;
    }

    public static int checksum(final DirectBuffer buffer, final int offset)
    {
        return buffer.getShort(offset + CHECKSUM_OFFSET, BIG_ENDIAN) & 0xFFFF;
    }

    /**
     * @return source address as an unsigned 32-bit value in an int (network order).
     */
    public static int src(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + SRC_OFFSET, BIG_ENDIAN);
    }

    public static int dst(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + DST_OFFSET, BIG_ENDIAN);
    }

    /**
     * Write a 20-byte header without options, checksum computed.
     */
    public static void write(
        final MutableDirectBuffer buffer,
        final int offset,
        final int tos,
        final int totalLength,
        final int identification,
        final int ttl,
        final int protocol,
        final int src,
        final int dst)
    {
        buffer.putByte(offset + VERSION_IHL_OFFSET, (byte)0x45);
        buffer.putByte(offset + TOS_OFFSET, (byte)tos);
        buffer.putShort(offset + TOTAL_LENGTH_OFFSET, (short)totalLength, BIG_ENDIAN);
        buffer.putShort(offset + IDENTIFICATION_OFFSET, (short)identification, BIG_ENDIAN);
        buffer.putShort(offset + FLAGS_FRAGMENT_OFFSET, (short)FLAG_DONT_FRAGMENT, BIG_ENDIAN);
        buffer.putByte(offset + TTL_OFFSET, (byte)ttl);
        buffer.putByte(offset + PROTOCOL_OFFSET, (byte)protocol);
        buffer.putInt(offset + SRC_OFFSET, src, BIG_ENDIAN);
        buffer.putInt(offset + DST_OFFSET, dst, BIG_ENDIAN);
        // From the values, not read back from the buffer: every sent packet's header is written here, and reading
        // shorts over the bytes just stored stalls each load (no store-to-load forwarding across two stores).
        final int sum = (0x4500 | (tos & 0xFF)) + (totalLength & 0xFFFF) + (identification & 0xFFFF) +
            FLAG_DONT_FRAGMENT + (((ttl & 0xFF) << 8) | (protocol & 0xFF)) + wordSum(src) + wordSum(dst);
        buffer.putShort(offset + CHECKSUM_OFFSET, (short)checksumOf(sum), BIG_ENDIAN);
    }

    /**
     * @return the sum of the two 16-bit words of {@code value}, for a header checksum.
     */
    private static int wordSum(final int value)
    {
        return (value >>> 16) + (value & 0xFFFF);
    }

    /**
     * @param sum a sum of 16-bit (or 32-bit) words of a header.
     * @return the header checksum of words summing to {@code sum}: their one's complement sum, complemented.
     */
    public static int checksumOf(final long sum)
    {
        return InternetChecksum.complement(sum);
    }

    public static void totalLength(final MutableDirectBuffer buffer, final int offset, final int length)
    {
        buffer.putShort(offset + TOTAL_LENGTH_OFFSET, (short)length, BIG_ENDIAN);
    }

    public static void tos(final MutableDirectBuffer buffer, final int offset, final int tos)
    {
        buffer.putByte(offset + TOS_OFFSET, (byte)tos);
    }

    /**
     * Recompute the header checksum over the whole header including options.
     */
    public static void updateChecksum(final MutableDirectBuffer buffer, final int offset)
    {
        buffer.putShort(offset + CHECKSUM_OFFSET, (short)0);
        buffer.putShort(offset + CHECKSUM_OFFSET, (short)computeChecksum(buffer, offset), BIG_ENDIAN);
    }

    /**
     * @return the checksum the header should carry (computed with the checksum field as it is, so a valid
     * header yields 0 when the field is included).
     */
    public static int computeChecksum(final DirectBuffer buffer, final int offset)
    {
        final int length = headerLength(buffer, offset);
        long sum = 0;
        for (int i = 0; i < length; i += 4)
        {
            // 32-bit words: a one's complement sum of them, folded to 16 bits, is that of their 16-bit halves.
            sum += buffer.getInt(offset + i, BIG_ENDIAN) & 0xFFFF_FFFFL;
        }
        return checksumOf(sum);
    }

    public static String formatAddress(final int address)
    {
        return ((address >>> 24) & 0xFF) + "." + ((address >>> 16) & 0xFF) + "." +
            ((address >>> 8) & 0xFF) + "." + (address & 0xFF);
    }
}
