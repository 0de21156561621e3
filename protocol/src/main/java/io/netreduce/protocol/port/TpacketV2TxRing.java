package io.netreduce.protocol.port;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;

import static io.netreduce.protocol.port.LinuxPacketAbi.*;

/**
 * Writes the TPACKET_V2 transmit ring of an {@link AfPacketPort}: fixed-size slots, each starting with a
 * {@code struct tpacket2_hdr} whose tp_status user space sets to TP_STATUS_SEND_REQUEST and the kernel sets back
 * to TP_STATUS_AVAILABLE once it has taken the frame.
 * <p>
 * {@link #tryClaim} points into the next free slot, {@link #commit} marks it for sending (or, with segmentation
 * offload, lets the {@link UdpSegmentBatcher} copy the frame into an open batch's slot; a claim that names the
 * destination may be placed in that batch already, and then needs no copy), and {@link #flush} kicks
 * the kernel with one non-blocking {@code sendto} on the transmit socket and counts the slots it took. Slots are
 * used in ring order and never straddle the ring's blocks; where each starts is worked out once when the ring is
 * set up. Owning thread only; allocation-free.
 */
final class TpacketV2TxRing
{
    private final String name;
    private final int fd;
    private final MemorySegment errnoState;
    private final UnsafeBuffer ring;
    private final PortCounters counters;
    private final int[] slotOffsets;
    private final int[] slotLengths;
    /** Wire frames in each queued slot: more than one for a segmentation offload batch. */
    private final int[] slotFrames;
    private final int maxFrameLength;
    /** Bytes in front of each frame in a slot: the virtio_net_hdr with segmentation offload, else none. */
    private final int vnetHeaderLength;
    private final UdpSegmentBatcher batcher;

    /** The bytes an in-place claim's headers cover: the tail of the batch's last payload, put back on commit. */
    private final UnsafeBuffer savedTail = new UnsafeBuffer(new byte[UdpSegmentBatcher.HEADER_LENGTH]);
    /** Where the open claim's frame starts inside an open batch ({@link #tryClaim(int, long)}), or -1. */
    private int inPlaceAt = -1;

    private int head;
    private int pendingStart;
    private int pendingCount;
    private int claimLength;
    private boolean closed;

    /**
     * @param name                the port's name, for errors.
     * @param fd                  the transmit socket the ring belongs to.
     * @param errnoState          where the kick captures errno (the port's).
     * @param mapAddress          the mapped ring.
     * @param mapLength           the mapped ring's length.
     * @param slotOffsets         where each slot starts in the ring, in ring order.
     * @param slotSize            tp_frame_size the ring was set up with.
     * @param mtu                 the interface's MTU: the kernel refuses longer frames (bar a VLAN tag).
     * @param segmentationOffload whether the socket has PACKET_VNET_HDR, so frames are batched.
     * @param counters            where transmitted frames and refusals are counted.
     */
    TpacketV2TxRing(
        final String name,
        final int fd,
        final MemorySegment errnoState,
        final long mapAddress,
        final long mapLength,
        final int[] slotOffsets,
        final int slotSize,
        final int mtu,
        final boolean segmentationOffload,
        final PortCounters counters)
    {
        this.name = name;
        this.fd = fd;
        this.errnoState = errnoState;
        this.ring = AfPacketPort.ringBuffer(mapAddress, mapLength);
        this.counters = counters;
        this.slotOffsets = slotOffsets;
        this.slotLengths = new int[slotOffsets.length];
        this.slotFrames = new int[slotOffsets.length];
        vnetHeaderLength = segmentationOffload ? VirtioNetHeader.LENGTH : 0;
        batcher = segmentationOffload ? new UdpSegmentBatcher(ring, counters,
            slotSize - TPACKET2_TX_DATA_OFFSET - VirtioNetHeader.LENGTH) : null;
        maxFrameLength = Math.min(slotSize - TPACKET2_TX_DATA_OFFSET - vnetHeaderLength, mtu + ETH_HLEN + VLAN_HLEN);
    }

    /**
     * @return the longest frame {@link #tryClaim} accepts: the slot size less its header, and at most
     *         MTU + Ethernet header + one VLAN tag (the kernel's own limit).
     */
    int maxFrameLength()
    {
        return maxFrameLength;
    }

    /**
     * @return the index of the claimed frame in {@link #buffer()}, or -1 (counted) if closed, the length is out of
     *         bounds or no slot is free.
     */
    int tryClaim(final int length)
    {
        giveUpInPlaceClaim();
        claimLength = 0;
        if (closed || length < ETH_HLEN || length > maxFrameLength)
        {
            counters.add(PortCounters.TX_ERRORS, 1);
            return -1;
        }
        final int slotOffset = slotOffsets[head];
        if (pendingCount == slotOffsets.length ||
            ring.getIntVolatile(slotOffset + TPACKET2_HDR_STATUS_OFFSET) != TP_STATUS_AVAILABLE)
        {
            counters.add(PortCounters.TX_RING_FULL, 1);
            return -1;
        }
        claimLength = length;
        return slotOffset + TPACKET2_TX_DATA_OFFSET + vnetHeaderLength;
    }

    /**
     * Queue one frame in a slot of its own, outside any batch, behind a virtio header that asks the kernel to finish
     * its L4 checksum (CHECKSUM_PARTIAL: the checksum field at {@code checksumField} from {@code checksumStart}), as a
     * host's stack hands frames to a device with checksum offload; {@code checksumStart} &lt; 0: a plain frame. A
     * port on the same host receives such a frame flagged checksum-not-ready, as the appliance receives frames from
     * a veth. Needs segmentation offload (every frame carries a virtio header).
     *
     * @return false (counted) if closed, the length is out of bounds or no slot is free.
     */
    boolean sendUnbatched(final DirectBuffer buffer, final int offset, final int length, final int checksumStart,
        final int checksumField)
    {
        if (batcher == null)
        {
            throw new IllegalStateException(name + ": a frame's own virtio header needs segmentation offload");
        }
        final int index = tryClaim(length);
        if (index < 0)
        {
            return false;
        }
        claimLength = 0;
        batcher.closeAll(); // the open batches go first, in ring order
        ring.putBytes(index, buffer, offset, length);
        final int vnet = index - VirtioNetHeader.LENGTH;
        ring.setMemory(vnet, VirtioNetHeader.LENGTH, (byte)0);
        if (checksumStart >= 0)
        {
            ring.putByte(vnet + VirtioNetHeader.FLAGS_OFFSET, (byte)VirtioNetHeader.F_NEEDS_CSUM);
            ring.putShort(vnet + VirtioNetHeader.CSUM_START_OFFSET, (short)checksumStart, ByteOrder.LITTLE_ENDIAN);
            ring.putShort(vnet + VirtioNetHeader.CSUM_OFFSET_OFFSET, (short)checksumField, ByteOrder.LITTLE_ENDIAN);
        }
        final int slot = head;
        LinuxPacketAbi.requestSend(ring, slotOffsets[slot], VirtioNetHeader.LENGTH + length);
        queued(slot, length);
        return true;
    }

    /**
     * {@link #tryClaim(int)} that, when a batch to {@code destinationMac} is open and has room, places the frame
     * right behind the batch's payloads instead (its headers over their last bytes, saved here), so that a frame
     * that joins the batch on {@link #commit} needs no copy. A free slot is still required, for a frame that turns
     * out not to join and is moved there.
     */
    int tryClaim(final int length, final long destinationMac)
    {
        final int index = tryClaim(length);
        if (index < 0 || batcher == null)
        {
            return index;
        }
        final int at = batcher.inPlacePosition(destinationMac, length);
        if (at < 0)
        {
            return index;
        }
        savedTail.putBytes(0, ring, at, UdpSegmentBatcher.HEADER_LENGTH);
        inPlaceAt = at;
        return at;
    }

    /**
     * An in-place claim not committed: put the batch's bytes back before anything else touches the batch.
     */
    private void giveUpInPlaceClaim()
    {
        if (inPlaceAt >= 0)
        {
            ring.putBytes(inPlaceAt, savedTail, 0, UdpSegmentBatcher.HEADER_LENGTH);
            inPlaceAt = -1;
        }
    }

    /**
     * @return the ring, which {@link #tryClaim} indexes into.
     */
    MutableDirectBuffer buffer()
    {
        return ring;
    }

    void commit()
    {
        final int length = claimLength;
        if (length == 0)
        {
            throw new IllegalStateException("commit without a claim on " + name);
        }
        claimLength = 0;
        final int slot = head;
        final int slotOffset = slotOffsets[slot];
        final UdpSegmentBatcher batcher = this.batcher;
        if (batcher != null)
        {
            final int frame = slotOffset + TPACKET2_TX_DATA_OFFSET + VirtioNetHeader.LENGTH;
            final int at = inPlaceAt;
            if (at >= 0)
            {
                inPlaceAt = -1;
                final int b = batcher.inPlaceJoinable(at, length);
                if (b < 0)
                {
                    // Not for that batch after all: into its own slot, as if claimed there.
                    ring.putBytes(frame, ring, at, length);
                }
                ring.putBytes(at, savedTail, 0, UdpSegmentBatcher.HEADER_LENGTH);
                if (b >= 0)
                {
                    batcher.appendInPlace(b, length);
                    final int batchSlot = batcher.appendedSlot();
                    slotLengths[batchSlot] += length;
                    slotFrames[batchSlot]++;
                    return;
                }
            }
            if (batcher.tryAppend(frame, length))
            {
                // Copied into an open batch's slot; this slot stays free for the next claim.
                final int batchSlot = batcher.appendedSlot();
                slotLengths[batchSlot] += length;
                slotFrames[batchSlot]++;
                return;
            }
            batcher.queue(slot, slotOffset, frame, length);
        }
        else
        {
            LinuxPacketAbi.requestSend(ring, slotOffset, length);
        }
        queued(slot, length);
    }

    /**
     * The frame of {@code length} bytes in the head slot is queued on its own: the next claim takes the next slot.
     */
    private void queued(final int slot, final int length)
    {
        slotLengths[slot] = length;
        slotFrames[slot] = 1;
        head = RingIndex.next(slot, slotOffsets.length);
        pendingCount++;
    }

    /**
     * Kick the transmit ring and count the frames the kernel took. Frames the kernel could not take yet (queue
     * full, interface down) stay queued and go with a later flush.
     *
     * @return frames handed to the kernel by this call.
     */
    int flush()
    {
        if (closed || pendingCount == 0)
        {
            return 0;
        }
        if (inPlaceAt >= 0)
        {
            // An in-place claim open across a flush is given up, as by the next claim: its batch leaves now.
            giveUpInPlaceClaim();
            claimLength = 0;
        }
        if (batcher != null)
        {
            batcher.closeAll();
        }

        if (Libc.sendKick(errnoState, fd, MSG_DONTWAIT) < 0 &&
            !PortSystemCalls.isTransientSendError(Libc.errno(errnoState)))
        {
            counters.add(PortCounters.TX_ERRORS, 1);
        }

        // The kernel takes SEND_REQUEST slots strictly in ring order, so the taken ones lead the pending run.
        final UnsafeBuffer ring = this.ring;
        int taken = 0;
        while (pendingCount > 0)
        {
            final int slot = pendingStart;
            final int status = ring.getIntVolatile(slotOffsets[slot] + TPACKET2_HDR_STATUS_OFFSET);
            if (status == TP_STATUS_SEND_REQUEST)
            {
                break;
            }
            final int frames = slotFrames[slot];
            counters.onFrameTransmitted(slotLengths[slot]);
            if (frames > 1)
            {
                counters.add(PortCounters.TX_FRAMES, frames - 1);
            }
            taken += frames;
            pendingCount--;
            pendingStart = RingIndex.next(slot, slotOffsets.length);
        }
        if (pendingCount > 0)
        {
            counters.add(PortCounters.TX_KICKS_REFUSED, 1);
        }

        return taken;
    }

    /**
     * @return whether frames are queued that the kernel has not taken yet.
     */
    boolean hasPending()
    {
        return pendingCount > 0;
    }

    /**
     * Refuse further claims and flushes; stray use after close must fail in Java, not touch unmapped memory.
     */
    void close()
    {
        closed = true;
        ring.wrap(new byte[0]);
    }
}
