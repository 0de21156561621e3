package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * The ECN field (RFC 3168) of an IPv4 or IPv6 header: the low two bits of the IPv4 TOS byte or of the IPv6 traffic
 * class. The version is read from the header's first nibble, so one call serves both families.
 * <p>
 * Rewriting the field keeps an IPv4 header valid with an incremental checksum update (RFC 1624, eqn. 3), a few
 * operations instead of a pass over the header. IPv6 has no header checksum, and neither family's UDP checksum
 * covers the field (it is not in the pseudo-header). The RoCEv2 ICRC masks the whole TOS / traffic class, so a
 * frame's ICRC stays valid too.
 * <p>
 * Allocation-free; static.
 */
public final class Ecn
{
    /** Not ECN-capable transport. */
    public static final int NOT_ECT = 0;
    /** ECN-capable transport, codepoint ECT(1). */
    public static final int ECT_1 = 1;
    /** ECN-capable transport, codepoint ECT(0): what our senders set. */
    public static final int ECT_0 = 2;
    /** Congestion experienced. */
    public static final int CE = 3;
    private static final int IPV6_ECN_SHIFT = 4;

    private Ecn()
    {
    }

    /**
     * @param l3Offset offset of the IPv4 or IPv6 header.
     * @return the ECN codepoint, {@link #NOT_ECT} .. {@link #CE}.
     */
    public static int of(final DirectBuffer buffer, final int l3Offset)
    {
        final int second = buffer.getByte(l3Offset + 1) & 0xFF;
        return isIpv4(buffer, l3Offset) ? second & 0x3 : (second >>> IPV6_ECN_SHIFT) & 0x3;
    }

    /**
     * @return whether the codepoint is ECN-capable (ECT(0), ECT(1) or CE).
     */
    public static boolean isCapable(final int codepoint)
    {
        return codepoint != NOT_ECT;
    }

    /**
     * Write {@code codepoint} into the header's ECN field, DSCP untouched, the IPv4 checksum updated incrementally.
     * Nothing is written when the field already holds it.
     */
    public static void set(final MutableDirectBuffer buffer, final int l3Offset, final int codepoint)
    {
        final int second = buffer.getByte(l3Offset + 1) & 0xFF;
        if (isIpv4(buffer, l3Offset))
        {
            if ((second & 0x3) == codepoint)
            {
                return;
            }
            final int oldWord = buffer.getShort(l3Offset, BIG_ENDIAN) & 0xFFFF;
            final int newWord = (oldWord & 0xFFFC) | (codepoint & 0x3);
            buffer.putByte(l3Offset + Ipv4Header.TOS_OFFSET, (byte)newWord);
            final int checksum = buffer.getShort(l3Offset + Ipv4Header.CHECKSUM_OFFSET, BIG_ENDIAN) & 0xFFFF;
            buffer.putShort(l3Offset + Ipv4Header.CHECKSUM_OFFSET,
                (short)updatedChecksum(checksum, oldWord, newWord), BIG_ENDIAN);
            return;
        }
        if (((second >>> IPV6_ECN_SHIFT) & 0x3) == codepoint)
        {
            return;
        }
        final int mask = 0x3 << IPV6_ECN_SHIFT;
        buffer.putByte(l3Offset + 1, (byte)((second & ~mask) | ((codepoint & 0x3) << IPV6_ECN_SHIFT)));
    }

    /**
     * Mark the header congestion experienced (see {@link #set}).
     */
    public static void markCe(final MutableDirectBuffer buffer, final int l3Offset)
    {
        set(buffer, l3Offset, CE);
    }

    /**
     * RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m'), in one's complement arithmetic.
     *
     * @return the header checksum after the 16-bit word {@code oldWord} became {@code newWord}.
     */
    static int updatedChecksum(final int checksum, final int oldWord, final int newWord)
    {
        int sum = (~checksum & 0xFFFF) + (~oldWord & 0xFFFF) + (newWord & 0xFFFF);
        sum = (sum & 0xFFFF) + (sum >>> 16);
        sum = (sum & 0xFFFF) + (sum >>> 16);
        return ~sum & 0xFFFF;
    }

    private static boolean isIpv4(final DirectBuffer buffer, final int l3Offset)
    {
        return ((buffer.getByte(l3Offset) >>> 4) & 0xF) == 4;
    }

    /**
     * @return the codepoint's name: Not-ECT, ECT(1), ECT(0) or CE.
     */
    public static String name(final int codepoint)
    {
        return switch (codepoint & 0x3)
        {
            case NOT_ECT -> "Not-ECT";
            case ECT_1 -> "ECT(1)";
            case ECT_0 -> "ECT(0)";
            default -> "CE";
        };
    }
}
