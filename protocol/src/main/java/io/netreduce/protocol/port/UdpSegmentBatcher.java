package io.netreduce.protocol.port;

import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.L4Checksum;
import io.netreduce.protocol.wire.UdpHeader;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteOrder;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * Coalesces the RoCEv2 frames committed to an AF_PACKET transmit ring into UDP segmentation offload batches: one
 * ring slot, one kernel packet, holding the headers once and the UDP payloads of up to {@link #MAX_SEGMENTS}
 * consecutive frames to the same destination, which the kernel (or the NIC, or nothing on veth) cuts back into
 * those frames. On veth and through a Linux bridge the batch travels whole, so the kernel's per-packet work (the
 * socket's send path, the bridge, each qdisc, the receiver's ring) is done once per batch instead of once per
 * frame, as it is for TCP, whose segmentation offload every veth bed gives it.
 * <p>
 * A frame joins the open batch to its destination MAC when it is the same flow and the kernel's segmentation
 * would give it back bit for bit: the same Ethernet, IPv4 (no options, not a fragment, DF as the writer set it)
 * and UDP headers except the lengths and checksums, the IPv4 identification one past the batch's last (the
 * kernel numbers segments consecutively), a UDP checksum of 0, and a payload as long as the batch's first (or
 * shorter, which ends the batch: only the last segment may be short). Anything else (another flow, an ACK, a
 * retransmission out of sequence, IPv6, VLAN tags) ends the destination's open batch and goes on alone, so frames
 * to one destination leave in the order they were committed. Every open batch is closed on flush, before the kick.
 * <p>
 * The ICRC of each frame covers its own IPv4 header, identification and lengths included, so the segments the
 * kernel makes, and the ones {@link UdpSegmentSplitter} restores on a receiving port, are exactly the frames
 * written; only the UDP checksum differs where the kernel fills it in (RoCEv2 masks it out of the ICRC).
 * Owning thread only; allocation-free.
 */
final class UdpSegmentBatcher
{
    /** Segments per batch at most (the kernel allows 128 UDP GSO segments; IPv4's 64 KiB limit comes first). */
    static final int MAX_SEGMENTS = 64;
    /** Destinations with a batch open at once; the oldest is closed to make room. */
    static final int MAX_OPEN = 16;

    private static final int L3 = EthernetHeader.LENGTH;
    private static final int L4 = L3 + Ipv4Header.MIN_LENGTH;
    /** Ethernet, IPv4 without options and UDP: the header every segment carries. */
    static final int HEADER_LENGTH = L4 + UdpHeader.LENGTH;
    private static final int MAX_IP_TOTAL_LENGTH = 0xFFFF;
    private static final long MAC_MASK = 0xFFFF_FFFF_FFFFL;
    private static final int ROCE_V2_PORT = UdpHeader.ROCE_V2_PORT;
    private static final boolean LITTLE_ENDIAN = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;

    private final UnsafeBuffer ring;
    /** Longest batch frame: an IPv4 datagram of 64 KiB behind its Ethernet header, or less if the slot is less. */
    private final int maxBatchLength;
    private final int[] slotIndex = new int[MAX_OPEN];
    private final int[] slotHeader = new int[MAX_OPEN];
    private final int[] frameStart = new int[MAX_OPEN];
    private final int[] frameEnd = new int[MAX_OPEN];
    private final int[] segmentLength = new int[MAX_OPEN];
    private final int[] segments = new int[MAX_OPEN];
    private final int[] nextIdentification = new int[MAX_OPEN];
    private final long[] destination = new long[MAX_OPEN];
    private int open;

    /** Set by {@link #tryAppend}: the ring slot of the batch the frame joined. */
    private int appendedSlot;

    private final PortCounters counters;

    /**
     * @param slotFrameLength bytes a transmit slot holds for a frame, after its vnet header: no batch grows longer.
     */
    UdpSegmentBatcher(final UnsafeBuffer ring, final PortCounters counters, final int slotFrameLength)
    {
        this.ring = ring;
        this.maxBatchLength = Math.min(L3 + MAX_IP_TOTAL_LENGTH, slotFrameLength);
        this.counters = counters;
    }

    /**
     * Add the frame at {@code frame} (in the slot just claimed, not yet queued) to its destination's open batch if
     * it can join it. When it cannot, the destination's batch is closed, so that the frame, queued in its own slot
     * next, leaves after it.
     *
     * @return true if the frame was copied into an open batch (its own slot stays free; see
     *         {@link #appendedSlot()}), false if the caller must queue the frame in its slot.
     */
    boolean tryAppend(final int frame, final int length)
    {
        final long dst = ring.getLong(frame) & MAC_MASK;
        final int b = find(dst);
        if (b < 0)
        {
            return false;
        }
        if (joins(b, frame, length))
        {
            final int payload = length - HEADER_LENGTH;
            ring.putBytes(frameEnd[b], ring, frame + HEADER_LENGTH, payload);
            appended(b, payload);
            return true;
        }
        close(b);
        return false;
    }

    /**
     * @return where a frame of {@code length} bytes to {@code destinationMac} would start if written in place, its
     *         payload right behind the payloads of that destination's open batch (its headers over the last
     *         {@link #HEADER_LENGTH} bytes of them, which the caller saves and puts back), or -1 when no batch to it
     *         is open or it has no room. Nothing changes until {@link #inPlaceJoinable} and {@link #appendInPlace}.
     */
    int inPlacePosition(final long destinationMac, final int length)
    {
        final int b = LITTLE_ENDIAN ? find(destinationKey(destinationMac)) : -1;
        if (b < 0)
        {
            return -1;
        }
        final int payload = length - HEADER_LENGTH;
        final int start = frameStart[b];
        // A first segment shorter than the headers would put them over the batch's own headers.
        if (segmentLength[b] < HEADER_LENGTH || payload <= 0 || payload > segmentLength[b] ||
            segments[b] >= MAX_SEGMENTS || frameEnd[b] + payload - start > maxBatchLength)
        {
            return -1;
        }
        return frameEnd[b] - HEADER_LENGTH;
    }

    /**
     * @return the open batch that the frame written at {@code frame} (where {@link #inPlacePosition} said) joins
     *         as it lies, or -1 if it does not (the caller moves it into a slot of its own and offers it to
     *         {@link #tryAppend} there, which closes the batch as for any frame that cannot join). Changes nothing.
     */
    int inPlaceJoinable(final int frame, final int length)
    {
        final int b = find(ring.getLong(frame) & MAC_MASK);
        return b >= 0 && frame == frameEnd[b] - HEADER_LENGTH && joins(b, frame, length) ? b : -1;
    }

    /**
     * Count the frame {@link #inPlaceJoinable} accepted into batch {@code b}: its payload is already in place.
     */
    void appendInPlace(final int b, final int length)
    {
        appended(b, length - HEADER_LENGTH);
    }

    private boolean joins(final int b, final int frame, final int length)
    {
        final int payload = length - HEADER_LENGTH;
        final int start = frameStart[b];
        return eligible(frame, length) &&
            sameFlow(start, frame) &&
            identification(frame) == nextIdentification[b] &&
            payload <= segmentLength[b] &&
            segments[b] < MAX_SEGMENTS &&
            frameEnd[b] + payload - start <= maxBatchLength;
    }

    private void appended(final int b, final int payload)
    {
        frameEnd[b] += payload;
        segments[b]++;
        nextIdentification[b] = (nextIdentification[b] + 1) & 0xFFFF;
        appendedSlot = slotIndex[b];
        if (payload < segmentLength[b] ||
            frameEnd[b] + segmentLength[b] - frameStart[b] > maxBatchLength)
        {
            close(b);
        }
    }

    /**
     * @return a MAC (48 bits, first byte most significant) as {@link #find} keys it: the frame's first six bytes
     *         read as one little-endian long (x86 and aarch64, the platforms AF_PACKET runs on here).
     */
    static long destinationKey(final long mac)
    {
        return Long.reverseBytes(mac << 16) & MAC_MASK;
    }

    /**
     * @return the ring slot of the batch the last successful {@link #tryAppend} used.
     */
    int appendedSlot()
    {
        return appendedSlot;
    }

    /**
     * Queue the frame in its own slot: as the start of a new batch if it could have followers (left open, to be
     * closed by a later frame or {@link #closeAll()}), else at once, as a plain frame.
     */
    void queue(final int slot, final int slotHeader, final int frame, final int length)
    {
        if (!eligible(frame, length))
        {
            ring.setMemory(frame - VirtioNetHeader.LENGTH, VirtioNetHeader.LENGTH, (byte)0);
            LinuxPacketAbi.requestSend(ring, slotHeader, VirtioNetHeader.LENGTH + length);
            return;
        }
        if (open == MAX_OPEN)
        {
            close(0);
        }
        final int b = open++;
        slotIndex[b] = slot;
        this.slotHeader[b] = slotHeader;
        frameStart[b] = frame;
        frameEnd[b] = frame + length;
        segmentLength[b] = length - HEADER_LENGTH;
        segments[b] = 1;
        nextIdentification[b] = (identification(frame) + 1) & 0xFFFF;
        destination[b] = ring.getLong(frame) & MAC_MASK;
    }

    /**
     * Close every open batch: their slots become SEND_REQUEST, in ring order with the rest.
     */
    void closeAll()
    {
        while (open > 0)
        {
            close(open - 1);
        }
    }

    private int find(final long dst)
    {
        for (int b = 0; b < open; b++)
        {
            if (destination[b] == dst)
            {
                return b;
            }
        }
        return -1;
    }

    /**
     * Write the batch's headers for the kernel (a lone frame goes as it was written) and hand the slot over.
     */
    private void close(final int b)
    {
        final UnsafeBuffer ring = this.ring;
        final int start = frameStart[b];
        final int length = frameEnd[b] - start;
        final int vnet = start - VirtioNetHeader.LENGTH;
        if (segments[b] == 1)
        {
            ring.setMemory(vnet, VirtioNetHeader.LENGTH, (byte)0);
        }
        else
        {
            writeLengths(ring, start, length - HEADER_LENGTH);
            // CHECKSUM_PARTIAL: the kernel finishes the checksum per segment.
            L4Checksum.writeUdpPartial(ring, start + L3, start + L4);
            ring.putByte(vnet + VirtioNetHeader.FLAGS_OFFSET, (byte)VirtioNetHeader.F_NEEDS_CSUM);
            ring.putByte(vnet + VirtioNetHeader.GSO_TYPE_OFFSET, (byte)VirtioNetHeader.GSO_UDP_L4);
            ring.putShort(vnet + VirtioNetHeader.HDR_LEN_OFFSET, (short)HEADER_LENGTH, ByteOrder.LITTLE_ENDIAN);
            ring.putShort(vnet + VirtioNetHeader.GSO_SIZE_OFFSET, (short)segmentLength[b], ByteOrder.LITTLE_ENDIAN);
            ring.putShort(vnet + VirtioNetHeader.CSUM_START_OFFSET, (short)L4, ByteOrder.LITTLE_ENDIAN);
            ring.putShort(vnet + VirtioNetHeader.CSUM_OFFSET_OFFSET, (short)UdpHeader.CHECKSUM_OFFSET,
                ByteOrder.LITTLE_ENDIAN);
            counters.add(PortCounters.TX_GSO_FRAMES, 1);
        }
        LinuxPacketAbi.requestSend(ring, slotHeader[b], VirtioNetHeader.LENGTH + length);

        final int last = --open;
        if (b != last)
        {
            // Keep the open batches in the order they were opened, so the oldest is the one closed for room.
            System.arraycopy(slotIndex, b + 1, slotIndex, b, last - b);
            System.arraycopy(slotHeader, b + 1, slotHeader, b, last - b);
            System.arraycopy(frameStart, b + 1, frameStart, b, last - b);
            System.arraycopy(frameEnd, b + 1, frameEnd, b, last - b);
            System.arraycopy(segmentLength, b + 1, segmentLength, b, last - b);
            System.arraycopy(segments, b + 1, segments, b, last - b);
            System.arraycopy(nextIdentification, b + 1, nextIdentification, b, last - b);
            System.arraycopy(destination, b + 1, destination, b, last - b);
        }
    }

    /**
     * Whether segmentation would give this frame back exactly: untagged IPv4 without options, not a fragment,
     * UDP to the RoCEv2 port with a checksum of 0, and some payload.
     */
    private boolean eligible(final int frame, final int length)
    {
        final UnsafeBuffer ring = this.ring;
        return length >= HEADER_LENGTH + BthHeader.LENGTH &&
            ring.getShort(frame + EthernetHeader.ETHER_TYPE_OFFSET, BIG_ENDIAN) == EthernetHeader.ETHER_TYPE_IPV4 &&
            ring.getByte(frame + L3 + Ipv4Header.VERSION_IHL_OFFSET) == 0x45 &&
            !Ipv4Header.isFragment(ring, frame + L3) &&
            Ipv4Header.protocol(ring, frame + L3) == Ipv4Header.PROTOCOL_UDP &&
            Ipv4Header.totalLength(ring, frame + L3) == length - L3 &&
            (ring.getShort(frame + L4 + UdpHeader.DST_PORT_OFFSET, BIG_ENDIAN) & 0xFFFF) == ROCE_V2_PORT &&
            (ring.getShort(frame + L4 + UdpHeader.LENGTH_OFFSET, BIG_ENDIAN) & 0xFFFF) == length - L4 &&
            ring.getShort(frame + L4 + UdpHeader.CHECKSUM_OFFSET) == 0;
    }

    /**
     * Same Ethernet header, IPv4 version/TOS/flags/TTL/protocol/addresses, UDP ports and BTH destination QP (with
     * its reserved byte): one RoCE connection. Two connections between the same two hosts and ports (two jobs'
     * ranks on the same workers, whose results the appliance sends in turn) must not share a batch: a receiving
     * endpoint's socket filter ({@code RoceReceiveFilter.forQueuePairs}) reads the first segment's QP only, and
     * would give one endpoint the other's segments.
     */
    private boolean sameFlow(final int a, final int b)
    {
        final UnsafeBuffer ring = this.ring;
        return ring.getLong(a) == ring.getLong(b) &&
            ring.getInt(a + 8) == ring.getInt(b + 8) &&
            ring.getShort(a + 12) == ring.getShort(b + 12) &&
            ring.getShort(a + L3) == ring.getShort(b + L3) &&
            ring.getInt(a + L3 + Ipv4Header.FLAGS_FRAGMENT_OFFSET) ==
                ring.getInt(b + L3 + Ipv4Header.FLAGS_FRAGMENT_OFFSET) &&
            ring.getLong(a + L3 + Ipv4Header.SRC_OFFSET) == ring.getLong(b + L3 + Ipv4Header.SRC_OFFSET) &&
            ring.getInt(a + L4) == ring.getInt(b + L4) &&
            ring.getInt(a + HEADER_LENGTH + BthHeader.DEST_QP_OFFSET) ==
                ring.getInt(b + HEADER_LENGTH + BthHeader.DEST_QP_OFFSET);
    }

    /**
     * Write the IPv4 total length, the IPv4 checksum and the UDP length of the untagged IPv4 UDP frame (no IP
     * options) at {@code frame} for {@code payload} bytes of UDP payload: a batch's headers for the kernel.
     */
    static void writeLengths(final MutableDirectBuffer buffer, final int frame, final int payload)
    {
        buffer.putShort(frame + L3 + Ipv4Header.TOTAL_LENGTH_OFFSET,
            (short)(Ipv4Header.MIN_LENGTH + UdpHeader.LENGTH + payload), BIG_ENDIAN);
        Ipv4Header.updateChecksum(buffer, frame + L3);
        buffer.putShort(frame + L4 + UdpHeader.LENGTH_OFFSET, (short)(UdpHeader.LENGTH + payload), BIG_ENDIAN);
    }

    private int identification(final int frame)
    {
        return ring.getShort(frame + L3 + Ipv4Header.IDENTIFICATION_OFFSET, BIG_ENDIAN) & 0xFFFF;
    }
}
