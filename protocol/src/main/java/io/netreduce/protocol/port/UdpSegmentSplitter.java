package io.netreduce.protocol.port;

import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.UdpHeader;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteOrder;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * On a port receiving with PACKET_VNET_HDR, turns a UDP segmentation offload frame (one frame on the host for
 * several on the wire, which veth and a Linux bridge pass along whole) back into the frames it stands for, as the
 * kernel's segmentation would have cut them, and hands each to the port's handler in turn: the handlers above
 * the port only ever see wire frames.
 * <p>
 * Segment {@code k} is built in place, in the ring: the first segment's headers are copied over the last bytes of
 * segment {@code k - 1} (already handed over; a handler's view is valid only during its call), with the lengths
 * of this segment, the IPv4 identification {@code first + k} (the kernel numbers segments so), the IPv4 checksum
 * recomputed and a UDP checksum of 0, which RoCEv2 senders use and its ICRC masks. No copy of a payload is made.
 * <p>
 * Only untagged IPv4 UDP segmentation is split, the kind {@link UdpSegmentBatcher} sends; any other offload frame
 * (a TCP super-frame of a host's own stack, for example) is counted as {@link PortCounters#RX_GSO_UNSUPPORTED} and
 * dropped. Owning thread only; allocation-free.
 */
final class UdpSegmentSplitter implements FrameHandler
{
    private static final int L3 = EthernetHeader.LENGTH;
    private static final int L4 = L3 + Ipv4Header.MIN_LENGTH;
    private static final int HEADER_LENGTH = UdpSegmentBatcher.HEADER_LENGTH;

    private final PortCounters counters;
    private final UnsafeBuffer header = new UnsafeBuffer(new byte[HEADER_LENGTH]);
    private FrameHandler handler;

    UdpSegmentSplitter(final PortCounters counters)
    {
        this.counters = counters;
    }

    /**
     * @return this splitter, handing frames to {@code handler} until the next call.
     */
    UdpSegmentSplitter handler(final FrameHandler handler)
    {
        this.handler = handler;
        return this;
    }

    /**
     * @return the sum of the 16-bit words of the (option-less) IPv4 header in {@code header} other than its total
     *         length, identification and checksum.
     */
    private static int fixedWordSum(final UnsafeBuffer header)
    {
        int sum = 0;
        for (int i = 0; i < Ipv4Header.MIN_LENGTH; i += 2)
        {
            sum += header.getShort(L3 + i, BIG_ENDIAN) & 0xFFFF;
        }
        return sum - (header.getShort(L3 + Ipv4Header.TOTAL_LENGTH_OFFSET, BIG_ENDIAN) & 0xFFFF) -
            (header.getShort(L3 + Ipv4Header.IDENTIFICATION_OFFSET, BIG_ENDIAN) & 0xFFFF) -
            (header.getShort(L3 + Ipv4Header.CHECKSUM_OFFSET, BIG_ENDIAN) & 0xFFFF);
    }

    @Override
    public void onFrame(final MutableDirectBuffer buffer, final int offset, final int length, final int flags)
    {
        final int vnet = offset - VirtioNetHeader.LENGTH;
        final int gsoType = buffer.getByte(vnet + VirtioNetHeader.GSO_TYPE_OFFSET) & ~VirtioNetHeader.GSO_ECN & 0xFF;
        if (gsoType == VirtioNetHeader.GSO_NONE)
        {
            handler.onFrame(buffer, offset, length, flags);
            return;
        }
        final int segmentLength =
            buffer.getShort(vnet + VirtioNetHeader.GSO_SIZE_OFFSET, ByteOrder.LITTLE_ENDIAN) & 0xFFFF;
        if (gsoType != VirtioNetHeader.GSO_UDP_L4 ||
            segmentLength == 0 ||
            length <= HEADER_LENGTH ||
            buffer.getShort(offset + EthernetHeader.ETHER_TYPE_OFFSET, BIG_ENDIAN) != EthernetHeader.ETHER_TYPE_IPV4 ||
            buffer.getByte(offset + L3 + Ipv4Header.VERSION_IHL_OFFSET) != 0x45)
        {
            counters.add(PortCounters.RX_GSO_UNSUPPORTED, 1);
            return;
        }

        final int payloadLength = length - HEADER_LENGTH;
        final int count = (payloadLength + segmentLength - 1) / segmentLength;
        header.putBytes(0, buffer, offset, HEADER_LENGTH);
        final int firstIdentification = header.getShort(L3 + Ipv4Header.IDENTIFICATION_OFFSET, BIG_ENDIAN) & 0xFFFF;
        // The ring counted one frame of the whole length: count the wire frames and their headers.
        counters.add(PortCounters.RX_FRAMES, count - 1);
        counters.add(PortCounters.RX_BYTES, (long)(count - 1) * HEADER_LENGTH);
        counters.add(PortCounters.RX_GSO_FRAMES, 1);

        // Each segment's IPv4 checksum from the words that stay the same and the two that change (total length,
        // identification), not read back from the ring over the bytes just written (see Ipv4Header.write).
        final int fixedWords = fixedWordSum(header);
        final FrameHandler handler = this.handler;
        for (int k = 0; k < count; k++)
        {
            final int payload = Math.min(segmentLength, payloadLength - k * segmentLength);
            final int frame = offset + k * segmentLength;
            final int totalLength = Ipv4Header.MIN_LENGTH + UdpHeader.LENGTH + payload;
            final int identification = (firstIdentification + k) & 0xFFFF;
            buffer.putBytes(frame, header, 0, HEADER_LENGTH);
            buffer.putShort(frame + L3 + Ipv4Header.TOTAL_LENGTH_OFFSET, (short)totalLength, BIG_ENDIAN);
            buffer.putShort(frame + L3 + Ipv4Header.IDENTIFICATION_OFFSET, (short)identification, BIG_ENDIAN);
            buffer.putShort(frame + L3 + Ipv4Header.CHECKSUM_OFFSET,
                (short)Ipv4Header.checksumOf(fixedWords + totalLength + identification), BIG_ENDIAN);
            buffer.putShort(frame + L4 + UdpHeader.LENGTH_OFFSET, (short)(UdpHeader.LENGTH + payload), BIG_ENDIAN);
            buffer.putShort(frame + L4 + UdpHeader.CHECKSUM_OFFSET, (short)0);
            handler.onFrame(buffer, frame, HEADER_LENGTH + payload, flags & FrameHandler.FLAG_VLAN_TAG_STRIPPED);
        }
    }
}
