package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;

import static io.netreduce.protocol.port.LinuxPacketAbi.*;

/**
 * Walks a TPACKET_V2 receive ring: fixed-size frame slots, each starting with a {@code struct tpacket2_hdr} whose
 * {@code tp_status} the kernel sets to TP_STATUS_USER as soon as it has written the frame, and which user space
 * hands back by writing {@code TP_STATUS_KERNEL}. There is no block timer: a frame is visible the moment it lands.
 * <p>
 * The kernel fills slots strictly in ring order and drops (counting in PACKET_STATISTICS) when the next slot is
 * still user-owned, so reading and releasing in the same order keeps both sides in step. Slots never straddle
 * blocks: block {@code b} holds {@code blockSize / frameSize} slots from offset {@code b * blockSize}, and the tail
 * of a block is unused.
 * <p>
 * Same contract as {@link TpacketV3RxRing}: a batch limit, the host's own outgoing frames skipped, frames truncated
 * to fit a slot counted and skipped, TP_STATUS_CSUMNOTREADY mapped to {@link FrameHandler#FLAG_CHECKSUM_NOT_READY}.
 * Single-threaded, allocation-free.
 */
final class TpacketV2RxRing implements RxRing
{
    private static final int NO_SLOT = -1;

    private final UnsafeBuffer ring;
    private final int blockSize;
    private final int frameSize;
    private final int framesPerBlock;
    private final int blockCount;
    private final PortCounters counters;

    private int blockIndex;
    private int slotInBlock;
    private int slotOffset;
    /** A slot handed to a handler that threw: released at the start of the next read. */
    private int heldSlotOffset = NO_SLOT;

    /**
     * @param ring       the mapped ring: {@code blockCount} blocks of {@code blockSize} bytes.
     * @param blockSize  tp_block_size the ring was set up with.
     * @param blockCount tp_block_nr the ring was set up with.
     * @param frameSize  tp_frame_size the ring was set up with: the slot stride.
     * @param counters   where received and truncated frames are counted.
     */
    TpacketV2RxRing(
        final UnsafeBuffer ring,
        final int blockSize,
        final int blockCount,
        final int frameSize,
        final PortCounters counters)
    {
        if (frameSize <= 0 || frameSize > blockSize || blockCount <= 0)
        {
            throw new IllegalArgumentException(
                "frame size " + frameSize + " must be positive and fit a " + blockSize + "-byte block");
        }
        this.ring = ring;
        this.blockSize = blockSize;
        this.frameSize = frameSize;
        this.framesPerBlock = blockSize / frameSize;
        this.blockCount = blockCount;
        this.counters = counters;
    }

    /**
     * @return tp_frame_nr for this geometry: the kernel insists it equals slots per block times blocks.
     */
    static int frameCount(final int blockSize, final int blockCount, final int frameSize)
    {
        return (blockSize / frameSize) * blockCount;
    }

    @Override
    public int read(final FrameHandler handler, final int limit)
    {
        final UnsafeBuffer ring = this.ring;
        if (heldSlotOffset != NO_SLOT)
        {
            release(heldSlotOffset);
        }

        int delivered = 0;
        while (delivered < limit)
        {
            final int header = slotOffset;
            final int status = ring.getIntVolatile(header + TPACKET2_HDR_STATUS_OFFSET);
            if ((status & TP_STATUS_USER) == 0)
            {
                break;
            }
            // Advance before the callback so a throwing handler cannot make a frame come round twice.
            advance();

            final int packetType = ring.getByte(header + TPACKET2_SOCKADDR_LL_OFFSET + SOCKADDR_LL_PKTTYPE_OFFSET);
            final int snapLength = ring.getInt(header + TPACKET2_HDR_SNAPLEN_OFFSET);
            if (packetType == PACKET_OUTGOING)
            {
                release(header);
            }
            else if (snapLength != ring.getInt(header + TPACKET2_HDR_LEN_OFFSET))
            {
                counters.add(PortCounters.RX_TRUNCATED, 1);
                release(header);
            }
            else
            {
                final int flags = ((status & TP_STATUS_CSUMNOTREADY) != 0 ? FrameHandler.FLAG_CHECKSUM_NOT_READY : 0) |
                    ((status & TP_STATUS_VLAN_VALID) != 0 ? FrameHandler.FLAG_VLAN_TAG_STRIPPED : 0);
                final int macOffset = ring.getShort(header + TPACKET2_HDR_MAC_OFFSET) & 0xFFFF;
                counters.onFrameReceived(snapLength);
                delivered++;
                heldSlotOffset = header;
                handler.onFrame(ring, header + macOffset, snapLength, flags);
                release(header);
            }
        }

        return delivered;
    }

    @Override
    public boolean hasWork()
    {
        return heldSlotOffset != NO_SLOT ||
            (ring.getIntVolatile(slotOffset + TPACKET2_HDR_STATUS_OFFSET) & TP_STATUS_USER) != 0;
    }

    @Override
    public int capacity()
    {
        return framesPerBlock * blockCount;
    }

    /**
     * The kernel fills slots strictly in ring order and we release them in the same order, so the slots it has
     * handed over and we have not read form one run from the read position: if the slot {@code frames - 1} ahead is
     * ours, every slot before it is too.
     */
    @Override
    public boolean backlogAtLeast(final int frames)
    {
        if (frames < 1 || frames > capacity())
        {
            return false;
        }
        final int ahead = (blockIndex * framesPerBlock + slotInBlock + frames - 1) % capacity();
        final int offset = (ahead / framesPerBlock) * blockSize + (ahead % framesPerBlock) * frameSize;
        return (ring.getIntVolatile(offset + TPACKET2_HDR_STATUS_OFFSET) & TP_STATUS_USER) != 0;
    }

    private void advance()
    {
        if (++slotInBlock < framesPerBlock)
        {
            slotOffset += frameSize;
        }
        else
        {
            slotInBlock = 0;
            blockIndex = RingIndex.next(blockIndex, blockCount);
            slotOffset = blockIndex * blockSize;
        }
    }

    private void release(final int header)
    {
        // Release store: the kernel must not see the slot as free before we have finished reading it.
        ring.putIntRelease(header + TPACKET2_HDR_STATUS_OFFSET, TP_STATUS_KERNEL);
        heldSlotOffset = NO_SLOT;
    }
}
