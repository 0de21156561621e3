package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * Internet checksums of UDP and TCP segments.
 * <p>
 * {@link #completePartial} finishes a checksum the sender left for offload (Linux CHECKSUM_PARTIAL, seen by an
 * AF_PACKET reader as TP_STATUS_CSUMNOTREADY): the field already holds the folded pseudo-header sum, so the
 * checksum is the complement of the one's-complement sum over the whole L4 segment, field included.
 */
public final class L4Checksum
{
    public static final int PROTOCOL_TCP = 6;
    private static final int TCP_CHECKSUM_OFFSET = 16;

    private L4Checksum()
    {
    }

    /**
     * Complete the partial L4 checksum of a UDP or TCP frame over IPv4 or IPv6 (no extension headers).
     *
     * @return true if a checksum was written; false if the frame is not UDP/TCP or too short to tell.
     */
    public static boolean completePartial(final MutableDirectBuffer buffer, final int offset, final int length)
    {
        final int end = offset + length;
        int typeOffset = offset + EthernetHeader.ETHER_TYPE_OFFSET;
        if (offset + EthernetHeader.LENGTH > end)
        {
            return false;
        }
        int etherType = buffer.getShort(typeOffset, BIG_ENDIAN) & 0xFFFF;
        int tags = 0;
        while ((etherType == EthernetHeader.ETHER_TYPE_VLAN || etherType == EthernetHeader.ETHER_TYPE_QINQ) &&
            tags < 2 && typeOffset + 6 <= end)
        {
            typeOffset += EthernetHeader.VLAN_TAG_LENGTH;
            etherType = buffer.getShort(typeOffset, BIG_ENDIAN) & 0xFFFF;
            tags++;
        }
        final int l3 = typeOffset + 2;
        final int protocol;
        final int l4;
        final int l4Length;
        if (etherType == EthernetHeader.ETHER_TYPE_IPV4 && l3 + Ipv4Header.MIN_LENGTH <= end)
        {
            protocol = Ipv4Header.protocol(buffer, l3);
            l4 = l3 + Ipv4Header.headerLength(buffer, l3);
            l4Length = Ipv4Header.totalLength(buffer, l3) - Ipv4Header.headerLength(buffer, l3);
            if (Ipv4Header.isFragment(buffer, l3))
            {
                return false;
            }
        }
        else if (etherType == EthernetHeader.ETHER_TYPE_IPV6 && l3 + Ipv6Header.LENGTH <= end)
        {
            protocol = Ipv6Header.nextHeader(buffer, l3);
            l4 = l3 + Ipv6Header.LENGTH;
            l4Length = Ipv6Header.payloadLength(buffer, l3);
        }
        else
        {
            return false;
        }
        final int field;
        if (protocol == Ipv4Header.PROTOCOL_UDP)
        {
            field = UdpHeader.CHECKSUM_OFFSET;
        }
        else if (protocol == PROTOCOL_TCP)
        {
            field = TCP_CHECKSUM_OFFSET;
        }
        else
        {
            return false;
        }
        if (l4Length < field + 2 || l4 + l4Length > end)
        {
            return false;
        }
        int checksum = InternetChecksum.complement(sum(buffer, l4, l4Length, 0));
        if (protocol == Ipv4Header.PROTOCOL_UDP && checksum == 0)
        {
            checksum = 0xFFFF;
        }
        buffer.putShort(l4 + field, (short)checksum, BIG_ENDIAN);
        return true;
    }

    /**
     * Compute and store the full UDP checksum (pseudo-header + datagram) of a datagram.
     *
     * @param l3Offset  start of the IP header.
     * @param udpOffset start of the UDP header; the UDP length field must be right.
     */
    public static void writeUdp(final MutableDirectBuffer buffer, final int l3Offset, final int udpOffset)
    {
        final int udpLength = UdpHeader.length(buffer, udpOffset);
        buffer.putShort(udpOffset + UdpHeader.CHECKSUM_OFFSET, (short)0);
        final long sum = sum(buffer, udpOffset, udpLength, udpPseudoHeaderSum(buffer, l3Offset, udpLength));
        int checksum = InternetChecksum.complement(sum);
        if (checksum == 0)
        {
            checksum = 0xFFFF;
        }
        buffer.putShort(udpOffset + UdpHeader.CHECKSUM_OFFSET, (short)checksum, BIG_ENDIAN);
    }

    /**
     * @return true if the UDP checksum of the datagram is zero (absent) or verifies.
     */
    public static boolean verifyUdp(final DirectBuffer buffer, final int l3Offset, final int udpOffset)
    {
        if (UdpHeader.checksum(buffer, udpOffset) == 0)
        {
            return true;
        }
        final int udpLength = UdpHeader.length(buffer, udpOffset);
        return InternetChecksum.fold(
            sum(buffer, udpOffset, udpLength, udpPseudoHeaderSum(buffer, l3Offset, udpLength))) == 0xFFFF;
    }

    /**
     * Store in the UDP checksum field the folded, not complemented, sum of the pseudo-header alone, as a
     * checksum left for offload (CHECKSUM_PARTIAL) carries it: the kernel or the NIC finishes it over the datagram.
     *
     * @param l3Offset  start of the IP header.
     * @param udpOffset start of the UDP header; the UDP length field must be right.
     */
    public static void writeUdpPartial(final MutableDirectBuffer buffer, final int l3Offset, final int udpOffset)
    {
        final int udpLength = UdpHeader.length(buffer, udpOffset);
        buffer.putShort(udpOffset + UdpHeader.CHECKSUM_OFFSET,
            (short)InternetChecksum.fold(udpPseudoHeaderSum(buffer, l3Offset, udpLength)), BIG_ENDIAN);
    }

    /**
     * @return the unfolded sum of the UDP pseudo-header (addresses, protocol, UDP length) of an IPv4 or IPv6 datagram.
     */
    private static long udpPseudoHeaderSum(final DirectBuffer buffer, final int l3Offset, final int udpLength)
    {
        final long addresses = Ipv4Header.version(buffer, l3Offset) == 4 ?
            sum(buffer, l3Offset + Ipv4Header.SRC_OFFSET, 8, 0) : sum(buffer, l3Offset + Ipv6Header.SRC_OFFSET, 32, 0);
        return addresses + Ipv4Header.PROTOCOL_UDP + udpLength;
    }

    private static long sum(final DirectBuffer buffer, final int from, final int length, final long initial)
    {
        long sum = initial;
        int i = 0;
        for (; i + 1 < length; i += 2)
        {
            sum += buffer.getShort(from + i, BIG_ENDIAN) & 0xFFFF;
        }
        if (i < length)
        {
            sum += (buffer.getByte(from + i) & 0xFF) << 8;
        }
        return sum;
    }
}
