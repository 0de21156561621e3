package io.netreduce.protocol.writer;

import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.SwitchMlHeader;
import io.netreduce.protocol.wire.UdpHeader;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * Writes a SwitchML worker packet as p4app-switchML's DPDK client builds it ({@code BuildPacket} in
 * {@code dpdk_worker_thread_utils.inc}): Ethernet from the worker to the switch, IPv4 without options (TTL 128,
 * identification 0, no flags), UDP from the worker's port to the switch's, the 8-byte SwitchML header (message type
 * 1, the size code of the element count, the job number, the TSI, the pool index), the two exponent bytes and the
 * elements, big-endian int32. The UDP checksum is left 0 (the client's NIC offload would fill it; the P4 program
 * and the appliance ignore it).
 */
public final class SwitchMlPacketWriter
{
    public static final int HEADERS_LENGTH =
        EthernetHeader.LENGTH + Ipv4Header.MIN_LENGTH + UdpHeader.LENGTH + SwitchMlHeader.ELEMENTS_OFFSET;
    private static final int CLIENT_TTL = 128;

    private SwitchMlPacketWriter()
    {
    }

    /**
     * @return the frame length of a packet of {@code elements} elements.
     */
    public static int frameLength(final int elements)
    {
        return HEADERS_LENGTH + elements * Integer.BYTES;
    }

    /**
     * Write a worker packet's headers at {@code offset} as the client does (TTL 128, the size code of the element
     * count); the elements follow at {@link #elementsOffset(int)}.
     *
     * @return the frame's length.
     */
    public static int writeHeaders(
        final MutableDirectBuffer buffer,
        final int offset,
        final long srcMac,
        final long dstMac,
        final int srcIp,
        final int dstIp,
        final int srcPort,
        final int dstPort,
        final int job,
        final int tsi,
        final int poolIndex,
        final int exponent0,
        final int exponent1,
        final int elements)
    {
        return writeHeaders(buffer, offset, srcMac, dstMac, srcIp, dstIp, CLIENT_TTL, srcPort, dstPort,
            SwitchMlHeader.sizeCode(elements), job, tsi, poolIndex, exponent0, exponent1, elements);
    }

    /**
     * Write the headers of any SwitchML frame, a worker's packet or a switch's result (which udp_sender.p4 writes
     * with TTL 64 and the size code of the packet it answers): Ethernet, IPv4 without options (identification 0, no
     * flags, checksum computed), UDP with checksum 0, the SwitchML header with message type 1, the exponents.
     *
     * @return the frame's length.
     */
    public static int writeHeaders(
        final MutableDirectBuffer buffer,
        final int offset,
        final long srcMac,
        final long dstMac,
        final int srcIp,
        final int dstIp,
        final int ttl,
        final int srcPort,
        final int dstPort,
        final int sizeCode,
        final int job,
        final int tsi,
        final int poolIndex,
        final int exponent0,
        final int exponent1,
        final int elements)
    {
        final int udpLength = UdpHeader.LENGTH + SwitchMlHeader.ELEMENTS_OFFSET + elements * Integer.BYTES;
        EthernetHeader.dstMac(buffer, offset, dstMac);
        EthernetHeader.srcMac(buffer, offset, srcMac);
        EthernetHeader.etherType(buffer, offset, EthernetHeader.ETHER_TYPE_IPV4);
        final int ip = offset + EthernetHeader.LENGTH;
        buffer.putByte(ip + Ipv4Header.VERSION_IHL_OFFSET, (byte)0x45);
        buffer.putByte(ip + Ipv4Header.TOS_OFFSET, (byte)0);
        buffer.putShort(ip + Ipv4Header.TOTAL_LENGTH_OFFSET, (short)(Ipv4Header.MIN_LENGTH + udpLength), BIG_ENDIAN);
        buffer.putShort(ip + Ipv4Header.IDENTIFICATION_OFFSET, (short)0);
        buffer.putShort(ip + Ipv4Header.FLAGS_FRAGMENT_OFFSET, (short)0);
        buffer.putByte(ip + Ipv4Header.TTL_OFFSET, (byte)ttl);
        buffer.putByte(ip + Ipv4Header.PROTOCOL_OFFSET, (byte)Ipv4Header.PROTOCOL_UDP);
        buffer.putInt(ip + Ipv4Header.SRC_OFFSET, srcIp, BIG_ENDIAN);
        buffer.putInt(ip + Ipv4Header.DST_OFFSET, dstIp, BIG_ENDIAN);
        Ipv4Header.updateChecksum(buffer, ip);
        final int udp = ip + Ipv4Header.MIN_LENGTH;
        UdpHeader.write(buffer, udp, srcPort, dstPort, udpLength);
        SwitchMlHeader.write(buffer, udp + UdpHeader.LENGTH, SwitchMlHeader.MSG_TYPE_DATA, sizeCode, job, tsi,
            poolIndex, exponent0, exponent1);
        return frameLength(elements);
    }

    /**
     * @return where a packet's elements begin, for a frame at {@code offset}.
     */
    public static int elementsOffset(final int offset)
    {
        return offset + HEADERS_LENGTH;
    }

    /**
     * Write {@code count} elements (host ints) big-endian behind the headers.
     */
    public static void writeElements(
        final MutableDirectBuffer buffer, final int offset, final int[] values, final int from, final int count)
    {
        final int at = elementsOffset(offset);
        for (int i = 0; i < count; i++)
        {
            buffer.putInt(at + i * Integer.BYTES, values[from + i], BIG_ENDIAN);
        }
    }

    /**
     * @return element {@code i} of a SwitchML packet (or result) at {@code offset} without VLAN tags.
     */
    public static int element(final DirectBuffer buffer, final int offset, final int i)
    {
        return buffer.getInt(elementsOffset(offset) + i * Integer.BYTES, BIG_ENDIAN);
    }
}
