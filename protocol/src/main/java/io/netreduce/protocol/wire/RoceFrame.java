package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;

/**
 * A reusable parser over one Ethernet frame: finds every layer of a RoCEv2 packet and checks that the
 * lengths agree, without copying or allocating.
 * <p>
 * Usage: {@code status = frame.wrap(buffer, offset, length)}; when it is {@link #OK} the offsets and the BTH
 * fields are valid. {@link #NOT_ROCE} means the frame is something else (ARP, other UDP, IPv4 fragment...)
 * and must be passed through. {@link #TRUNCATED}, {@link #MALFORMED} and {@link #UNKNOWN_OPCODE} describe
 * RoCEv2 frames (UDP port 4791) that are broken; for {@code UNKNOWN_OPCODE} the BTH fields are valid.
 * The parser never reads outside {@code [offset, offset + length)}.
 */
public final class RoceFrame
{
    public static final int OK = 0;
    public static final int NOT_ROCE = 1;
    public static final int TRUNCATED = 2;
    public static final int MALFORMED = 3;
    public static final int UNKNOWN_OPCODE = 4;

    private static final int MAX_VLAN_TAGS = 2;

    /** Bytes of the ICRC trailer. */
    public static final int ICRC_LENGTH = 4;

    private DirectBuffer buffer;
    private int status = NOT_ROCE;
    private int frameOffset;
    private int frameLength;
    private int vlanCount;
    private int vlanId;
    private int l3Offset;
    private int ipVersion;
    private int ipHeaderLength;
    private int udpOffset;
    private int udpDstPort;
    private int udpLength;
    private int bthOffset;
    private int opcode;
    private int destQp;
    private int psn;
    private int padCount;
    private int payloadOffset;
    private int payloadLength;
    private int icrcOffset;

    /**
     * Parse a frame.
     *
     * @return the parse status, also available from {@link #status()}.
     */
    public int wrap(final DirectBuffer buffer, final int offset, final int length)
    {
        this.buffer = buffer;
        this.frameOffset = offset;
        this.frameLength = length;
        this.vlanCount = 0;
        this.vlanId = -1;
        this.opcode = -1;
        this.udpDstPort = -1;
        status = parse(buffer, offset, length);
        return status;
    }

    private int parse(final DirectBuffer buffer, final int offset, final int length)
    {
        final int end = offset + length;
        if (length < EthernetHeader.LENGTH)
        {
            return NOT_ROCE;
        }
        int typeOffset = offset + EthernetHeader.ETHER_TYPE_OFFSET;
        int etherType = readU16(buffer, typeOffset);
        while (etherType == EthernetHeader.ETHER_TYPE_VLAN || etherType == EthernetHeader.ETHER_TYPE_QINQ)
        {
            if (vlanCount == MAX_VLAN_TAGS || typeOffset + 2 + EthernetHeader.VLAN_TAG_LENGTH > end)
            {
                return NOT_ROCE;
            }
            vlanId = readU16(buffer, typeOffset + 2) & 0xFFF;
            vlanCount++;
            typeOffset += EthernetHeader.VLAN_TAG_LENGTH;
            etherType = readU16(buffer, typeOffset);
        }
        l3Offset = typeOffset + 2;

        final int l3End;
        if (etherType == EthernetHeader.ETHER_TYPE_IPV4)
        {
            if (l3Offset + Ipv4Header.MIN_LENGTH > end || Ipv4Header.version(buffer, l3Offset) != 4)
            {
                return NOT_ROCE;
            }
            ipVersion = 4;
            ipHeaderLength = Ipv4Header.headerLength(buffer, l3Offset);
            final int totalLength = Ipv4Header.totalLength(buffer, l3Offset);
            if (ipHeaderLength < Ipv4Header.MIN_LENGTH || totalLength < ipHeaderLength)
            {
                return NOT_ROCE;
            }
            if (Ipv4Header.protocol(buffer, l3Offset) != Ipv4Header.PROTOCOL_UDP ||
                Ipv4Header.isFragment(buffer, l3Offset))
            {
                return NOT_ROCE;
            }
            l3End = l3Offset + totalLength;
        }
        else if (etherType == EthernetHeader.ETHER_TYPE_IPV6)
        {
            if (l3Offset + Ipv6Header.LENGTH > end || Ipv6Header.version(buffer, l3Offset) != 6)
            {
                return NOT_ROCE;
            }
            ipVersion = 6;
            ipHeaderLength = Ipv6Header.LENGTH;
            if (Ipv6Header.nextHeader(buffer, l3Offset) != Ipv4Header.PROTOCOL_UDP)
            {
                return NOT_ROCE;
            }
            l3End = l3Offset + Ipv6Header.LENGTH + Ipv6Header.payloadLength(buffer, l3Offset);
        }
        else
        {
            return NOT_ROCE;
        }

        udpOffset = l3Offset + ipHeaderLength;
        if (udpOffset + UdpHeader.LENGTH > end)
        {
            // Too short even to see the port: if the IP header says more follows this is a cut RoCE frame we
            // cannot identify, so it is not ours to judge.
            return NOT_ROCE;
        }
        udpDstPort = UdpHeader.dstPort(buffer, udpOffset);
        if (udpDstPort != UdpHeader.ROCE_V2_PORT)
        {
            // Another UDP protocol: the port is kept (with udpOffset) for a dispatch by protocol.
            return NOT_ROCE;
        }
        if (l3End > end)
        {
            return TRUNCATED;
        }
        udpLength = UdpHeader.length(buffer, udpOffset);
        if (udpLength < UdpHeader.LENGTH || udpOffset + udpLength > l3End)
        {
            return MALFORMED;
        }
        bthOffset = udpOffset + UdpHeader.LENGTH;
        final int udpEnd = udpOffset + udpLength;
        if (bthOffset + BthHeader.LENGTH + ICRC_LENGTH > udpEnd)
        {
            return MALFORMED;
        }
        opcode = BthHeader.opcode(buffer, bthOffset);
        destQp = BthHeader.destQp(buffer, bthOffset);
        psn = BthHeader.psn(buffer, bthOffset);
        padCount = BthHeader.padCount(buffer, bthOffset);
        icrcOffset = udpEnd - ICRC_LENGTH;
        if (!Opcode.isValid(opcode))
        {
            payloadOffset = bthOffset + BthHeader.LENGTH;
            payloadLength = 0;
            return UNKNOWN_OPCODE;
        }
        payloadOffset = bthOffset + Opcode.headerLength(opcode);
        final int region = icrcOffset - payloadOffset;
        if (region < 0 || padCount > region)
        {
            return MALFORMED;
        }
        payloadLength = region - padCount;
        if (!Opcode.has(opcode, Opcode.HAS_PAYLOAD) && region != 0)
        {
            return MALFORMED;
        }
        if (opcode == Opcode.CNP && region != Opcode.CNP_RESERVED_LENGTH)
        {
            return MALFORMED;
        }
        return OK;
    }

    private static int readU16(final DirectBuffer buffer, final int index)
    {
        return ((buffer.getByte(index) & 0xFF) << 8) | (buffer.getByte(index + 1) & 0xFF);
    }

    public DirectBuffer buffer()
    {
        return buffer;
    }

    public int status()
    {
        return status;
    }

    public static String statusName(final int status)
    {
        return switch (status)
        {
            case OK -> "ok";
            case NOT_ROCE -> "not-roce";
            case TRUNCATED -> "truncated";
            case MALFORMED -> "malformed";
            case UNKNOWN_OPCODE -> "unknown-opcode";
            default -> "status-" + status;
        };
    }

    public int frameOffset()
    {
        return frameOffset;
    }

    public int frameLength()
    {
        return frameLength;
    }

    public int vlanCount()
    {
        return vlanCount;
    }

    /**
     * @return the innermost VLAN id, or -1 when the frame is untagged.
     */
    public int vlanId()
    {
        return vlanId;
    }

    public int l3Offset()
    {
        return l3Offset;
    }

    public int ipVersion()
    {
        return ipVersion;
    }

    public int ipHeaderLength()
    {
        return ipHeaderLength;
    }

    public int udpOffset()
    {
        return udpOffset;
    }

    /**
     * @return the UDP destination port of an unfragmented IPv4 or IPv6 UDP datagram whose UDP header lies within the
     *         frame (RoCEv2 or not), else -1; with {@link #udpOffset()} it lets a caller classify a frame that is
     *         {@link #NOT_ROCE} without parsing it again.
     */
    public int udpDstPort()
    {
        return udpDstPort;
    }

    public int udpLength()
    {
        return udpLength;
    }

    public int bthOffset()
    {
        return bthOffset;
    }

    public int opcode()
    {
        return opcode;
    }

    public int destQp()
    {
        return destQp;
    }

    public int psn()
    {
        return psn;
    }

    public int padCount()
    {
        return padCount;
    }

    /**
     * @return offset of the first extension header (RETH, AETH, ...) = end of the BTH.
     */
    public int extensionOffset()
    {
        return bthOffset + BthHeader.LENGTH;
    }

    public int payloadOffset()
    {
        return payloadOffset;
    }

    /**
     * @return payload bytes, excluding pad bytes.
     */
    public int payloadLength()
    {
        return payloadLength;
    }

    public int icrcOffset()
    {
        return icrcOffset;
    }

    /**
     * @return offset just past the ICRC: where the RoCE packet ends (Ethernet padding may follow).
     */
    public int roceEnd()
    {
        return icrcOffset + ICRC_LENGTH;
    }

    /**
     * @return IPv4 source address (only when {@link #ipVersion()} is 4).
     */
    public int srcIpv4()
    {
        return Ipv4Header.src(buffer, l3Offset);
    }

    public int dstIpv4()
    {
        return Ipv4Header.dst(buffer, l3Offset);
    }

    /**
     * @return offset of the source address in the IP header, for either version.
     */
    public int srcAddressOffset()
    {
        return l3Offset + (ipVersion == 4 ? Ipv4Header.SRC_OFFSET : Ipv6Header.SRC_OFFSET);
    }

    public int dstAddressOffset()
    {
        return l3Offset + (ipVersion == 4 ? Ipv4Header.DST_OFFSET : Ipv6Header.DST_OFFSET);
    }

    public int addressLength()
    {
        return ipVersion == 4 ? 4 : Ipv6Header.ADDRESS_LENGTH;
    }

    /**
     * @return the ECN codepoint of the IP header (3 = congestion experienced).
     */
    public int ecn()
    {
        return ipVersion == 4 ? Ipv4Header.ecn(buffer, l3Offset) : Ipv6Header.ecn(buffer, l3Offset);
    }

    public boolean ackRequest()
    {
        return BthHeader.ackRequest(buffer, bthOffset);
    }

    public boolean has(final int opcodeFlag)
    {
        return Opcode.has(opcode, opcodeFlag);
    }
}
