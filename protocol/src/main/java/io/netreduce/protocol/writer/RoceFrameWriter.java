package io.netreduce.protocol.writer;

import io.netreduce.protocol.wire.AethHeader;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.DethHeader;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.ImmDtHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.Ipv6Header;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RethHeader;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.wire.UdpHeader;
import io.netreduce.protocol.icrc.Icrc;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * Builds complete RoCEv2 frames: Ethernet (optional 802.1Q tag), IPv4 or IPv6, UDP, BTH, the extension
 * headers the opcode calls for, payload, pad and ICRC.
 * <p>
 * Set the addressing once with the setters (they describe one connection), then call
 * {@link #write(MutableDirectBuffer, int, int, int, boolean, DirectBuffer, int, int)} per packet. Extension
 * header values (RETH, AETH, ImmDt) are taken from the fields set before the call; only the ones the opcode
 * carries are written. Reusable and allocation-free after construction; not thread-safe.
 */
public final class RoceFrameWriter
{
    private static final int DEFAULT_TTL = 64;

    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();

    private long dstMac;
    private long srcMac;
    private int vlanTci = -1;
    private int ipVersion = 4;
    private int srcIpv4;
    private int dstIpv4;
    private final byte[] srcIpv6 = new byte[Ipv6Header.ADDRESS_LENGTH];
    private final byte[] dstIpv6 = new byte[Ipv6Header.ADDRESS_LENGTH];
    private int trafficClass;
    private int flowLabel;
    private int udpSrcPort = 0xC000;
    private int destQp;
    private int pkey = BthHeader.DEFAULT_PKEY;
    private int ipIdentification;

    private long rethVa;
    private int rethRkey;
    private int rethLength;
    private int aethSyndrome;
    private int aethMsn;
    private int immediate;

    /**
     * @return the destination MAC the frames are written to (48 bits).
     */
    public long dstMac()
    {
        return dstMac;
    }

    public RoceFrameWriter macs(final long srcMac, final long dstMac)
    {
        this.srcMac = srcMac;
        this.dstMac = dstMac;
        return this;
    }

    /**
     * @param tci VLAN tag control information (PCP, DEI, VID), or -1 for an untagged frame.
     */
    public RoceFrameWriter vlan(final int tci)
    {
        this.vlanTci = tci;
        return this;
    }

    public RoceFrameWriter ipv4(final int src, final int dst)
    {
        this.ipVersion = 4;
        this.srcIpv4 = src;
        this.dstIpv4 = dst;
        return this;
    }

    public RoceFrameWriter ipv6(final byte[] src, final byte[] dst)
    {
        this.ipVersion = 6;
        System.arraycopy(src, 0, srcIpv6, 0, Ipv6Header.ADDRESS_LENGTH);
        System.arraycopy(dst, 0, dstIpv6, 0, Ipv6Header.ADDRESS_LENGTH);
        return this;
    }

    /**
     * @param trafficClass IPv4 TOS or IPv6 traffic class (DSCP and ECN).
     * @param flowLabel    IPv6 flow label (ignored for IPv4).
     */
    public RoceFrameWriter trafficClass(final int trafficClass, final int flowLabel)
    {
        this.trafficClass = trafficClass;
        this.flowLabel = flowLabel;
        return this;
    }

    public RoceFrameWriter udpSrcPort(final int port)
    {
        this.udpSrcPort = port;
        return this;
    }

    public RoceFrameWriter destQp(final int qp)
    {
        this.destQp = qp;
        return this;
    }

    public RoceFrameWriter pkey(final int pkey)
    {
        this.pkey = pkey;
        return this;
    }

    public RoceFrameWriter reth(final long va, final int rkey, final int dmaLength)
    {
        this.rethVa = va;
        this.rethRkey = rkey;
        this.rethLength = dmaLength;
        return this;
    }

    public RoceFrameWriter aeth(final int syndrome, final int msn)
    {
        this.aethSyndrome = syndrome;
        this.aethMsn = msn;
        return this;
    }

    public RoceFrameWriter immediate(final int immediate)
    {
        this.immediate = immediate;
        return this;
    }

    /**
     * @return bytes from the start of the frame to the start of the BTH for the current addressing.
     */
    public int bthOffset()
    {
        return EthernetHeader.LENGTH + (vlanTci >= 0 ? EthernetHeader.VLAN_TAG_LENGTH : 0) +
            (ipVersion == 4 ? Ipv4Header.MIN_LENGTH : Ipv6Header.LENGTH) + UdpHeader.LENGTH;
    }

    /**
     * @return the frame length a packet of this opcode and payload length will have.
     */
    public int frameLength(final int opcode, final int payloadLength)
    {
        final int pad = (4 - (payloadLength & 3)) & 3;
        return bthOffset() + Opcode.headerLength(opcode) + payloadLength + pad + RoceFrame.ICRC_LENGTH;
    }

    /**
     * Write one frame at {@code offset}.
     *
     * @return the frame length in bytes.
     */
    public int write(
        final MutableDirectBuffer buffer,
        final int offset,
        final int opcode,
        final int psn,
        final boolean ackRequest,
        final DirectBuffer payload,
        final int payloadOffset,
        final int payloadLength)
    {
        final int pad = (4 - (payloadLength & 3)) & 3;
        int index = offset;
        EthernetHeader.dstMac(buffer, index, dstMac);
        EthernetHeader.srcMac(buffer, index, srcMac);
        if (vlanTci >= 0)
        {
            EthernetHeader.etherType(buffer, index, EthernetHeader.ETHER_TYPE_VLAN);
            index += EthernetHeader.VLAN_TAG_LENGTH;
            buffer.putShort(index + EthernetHeader.ETHER_TYPE_OFFSET - 2, (short)vlanTci, java.nio.ByteOrder.BIG_ENDIAN);
        }
        EthernetHeader.etherType(buffer, index, ipVersion == 4 ?
            EthernetHeader.ETHER_TYPE_IPV4 : EthernetHeader.ETHER_TYPE_IPV6);
        index += EthernetHeader.LENGTH;

        final int udpLength = UdpHeader.LENGTH + Opcode.headerLength(opcode) + payloadLength + pad +
            RoceFrame.ICRC_LENGTH;
        if (ipVersion == 4)
        {
            Ipv4Header.write(buffer, index, trafficClass, Ipv4Header.MIN_LENGTH + udpLength, ipIdentification++,
                DEFAULT_TTL, Ipv4Header.PROTOCOL_UDP, srcIpv4, dstIpv4);
            index += Ipv4Header.MIN_LENGTH;
        }
        else
        {
            Ipv6Header.write(buffer, index, trafficClass, flowLabel, udpLength, Ipv4Header.PROTOCOL_UDP,
                DEFAULT_TTL, srcIpv6, dstIpv6);
            index += Ipv6Header.LENGTH;
        }
        UdpHeader.write(buffer, index, udpSrcPort, UdpHeader.ROCE_V2_PORT, udpLength);
        index += UdpHeader.LENGTH;

        final boolean solicited = Opcode.has(opcode, Opcode.HAS_IMMDT);
        BthHeader.write(buffer, index, opcode, solicited, pad, pkey, destQp, ackRequest, psn);
        index += BthHeader.LENGTH;
        if (Opcode.has(opcode, Opcode.HAS_RETH))
        {
            RethHeader.write(buffer, index, rethVa, rethRkey, rethLength);
            index += RethHeader.LENGTH;
        }
        if (Opcode.has(opcode, Opcode.HAS_DETH))
        {
            buffer.setMemory(index, DethHeader.LENGTH, (byte)0);
            index += DethHeader.LENGTH;
        }
        if (Opcode.has(opcode, Opcode.HAS_ATOMIC_ETH))
        {
            buffer.setMemory(index, Opcode.ATOMIC_ETH_LENGTH, (byte)0);
            RethHeader.write(buffer, index, rethVa, rethRkey, 0);
            index += Opcode.ATOMIC_ETH_LENGTH;
        }
        if (Opcode.has(opcode, Opcode.HAS_AETH))
        {
            AethHeader.write(buffer, index, aethSyndrome, aethMsn);
            index += AethHeader.LENGTH;
        }
        if (Opcode.has(opcode, Opcode.HAS_ATOMIC_ACK_ETH))
        {
            buffer.setMemory(index, Opcode.ATOMIC_ACK_ETH_LENGTH, (byte)0);
            index += Opcode.ATOMIC_ACK_ETH_LENGTH;
        }
        if (Opcode.has(opcode, Opcode.HAS_IMMDT))
        {
            ImmDtHeader.write(buffer, index, immediate);
            index += ImmDtHeader.LENGTH;
        }
        if (Opcode.has(opcode, Opcode.HAS_IETH))
        {
            buffer.putInt(index, rethRkey, java.nio.ByteOrder.BIG_ENDIAN);
            index += Opcode.IETH_LENGTH;
        }
        if (payloadLength > 0)
        {
            buffer.putBytes(index, payload, payloadOffset, payloadLength);
            index += payloadLength;
        }
        if (pad > 0)
        {
            buffer.setMemory(index, pad, (byte)0);
            index += pad;
        }
        final int length = index + RoceFrame.ICRC_LENGTH - offset;
        frame.wrap(buffer, offset, length);
        Icrc.put(buffer, index, icrc.compute(frame));
        return length;
    }
}
