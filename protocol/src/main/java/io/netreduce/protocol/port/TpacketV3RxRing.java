package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;

import static io.netreduce.protocol.port.LinuxPacketAbi.*;

/**
 * Walks a TPACKET_V3 receive ring: blocks of frames that the kernel hands to user space whole
 * ({@code block_status & TP_STATUS_USER}) and that user space hands back by writing {@code TP_STATUS_KERNEL}.
 * <p>
 * Keeps its place inside a block between calls, so a batch limit can stop mid-block; the block goes back to the
 * kernel as soon as its last frame has been looked at. Skips the host's own outgoing frames, counts and skips
 * frames truncated to fit the block, and maps TP_STATUS_CSUMNOTREADY to
 * {@link FrameHandler#FLAG_CHECKSUM_NOT_READY}. Single-threaded, allocation-free.
 */
final class TpacketV3RxRing implements RxRing
{
    private final UnsafeBuffer ring;
    private final int blockSize;
    private final int blockCount;
    private final PortCounters counters;
    private final int framesPerBlock;

    private int blockIndex;
    private boolean blockHeld;
    private int blockOffset;
    private int frameOffset;
    private int framesLeftInBlock;

    /**
     * @param ring       the mapped ring: {@code blockCount} blocks of {@code blockSize} bytes.
     * @param blockSize  tp_block_size the ring was set up with.
     * @param blockCount tp_block_nr the ring was set up with.
     * @param slotSize   bytes a frame of the port's MTU takes in a block, for {@link #capacity()} and the backlog.
     * @param counters   where received and truncated frames are counted.
     */
    TpacketV3RxRing(
        final UnsafeBuffer ring,
        final int blockSize,
        final int blockCount,
        final int slotSize,
        final PortCounters counters)
    {
        this.framesPerBlock = Math.max(1, blockSize / Math.max(1, slotSize));
        this.ring = ring;
        this.blockSize = blockSize;
        this.blockCount = blockCount;
        this.counters = counters;
    }

    /**
     * Deliver up to {@code limit} frames, oldest first.
     *
     * @return frames delivered.
     */
    @Override
    public int read(final FrameHandler handler, final int limit)
    {
        final UnsafeBuffer ring = this.ring;
        int delivered = 0;
        while (delivered < limit)
        {
            if (!blockHeld)
            {
                final int nextBlockOffset = blockIndex * blockSize;
                if ((ring.getIntVolatile(nextBlockOffset + BLOCK_DESC_BLOCK_STATUS_OFFSET) & TP_STATUS_USER) == 0)
                {
                    break;
                }
                blockHeld = true;
                blockOffset = nextBlockOffset;
                framesLeftInBlock = ring.getInt(nextBlockOffset + BLOCK_DESC_NUM_PKTS_OFFSET);
                frameOffset = nextBlockOffset + ring.getInt(nextBlockOffset + BLOCK_DESC_OFFSET_TO_FIRST_PKT_OFFSET);
            }

            if (framesLeftInBlock > 0)
            {
                // Advance before the callback so a throwing handler cannot make a frame come round twice.
                final int header = frameOffset;
                frameOffset = header + ring.getInt(header + TPACKET3_HDR_NEXT_OFFSET_OFFSET);
                framesLeftInBlock--;

                final int packetType = ring.getByte(header + TPACKET3_SOCKADDR_LL_OFFSET + SOCKADDR_LL_PKTTYPE_OFFSET);
                if (packetType != PACKET_OUTGOING)
                {
                    final int snapLength = ring.getInt(header + TPACKET3_HDR_SNAPLEN_OFFSET);
                    if (snapLength != ring.getInt(header + TPACKET3_HDR_LEN_OFFSET))
                    {
                        counters.add(PortCounters.RX_TRUNCATED, 1);
                    }
                    else
                    {
                        final int status = ring.getInt(header + TPACKET3_HDR_STATUS_OFFSET);
                        final int flags = ((status & TP_STATUS_CSUMNOTREADY) != 0 ?
                            FrameHandler.FLAG_CHECKSUM_NOT_READY : 0) |
                            ((status & TP_STATUS_VLAN_VALID) != 0 ? FrameHandler.FLAG_VLAN_TAG_STRIPPED : 0);
                        final int macOffset = ring.getShort(header + TPACKET3_HDR_MAC_OFFSET) & 0xFFFF;
                        counters.onFrameReceived(snapLength);
                        delivered++;
                        handler.onFrame(ring, header + macOffset, snapLength, flags);
                    }
                }
            }

            if (framesLeftInBlock <= 0)
            {
                releaseBlock();
            }
        }

        return delivered;
    }

    /**
     * @return true if a block is held or the next one is ready, so {@link #read} would find frames (or an
     *         empty block to return).
     */
    @Override
    public boolean hasWork()
    {
        return blockHeld ||
            (ring.getIntVolatile(blockIndex * blockSize + BLOCK_DESC_BLOCK_STATUS_OFFSET) & TP_STATUS_USER) != 0;
    }

    @Override
    public int capacity()
    {
        return framesPerBlock * blockCount;
    }

    /**
     * Counted in whole blocks of {@code framesPerBlock} frames (a V3 block holds as many frames as arrived before it
     * filled or timed out, so this is the estimate for frames of the port's slot size): at least that many blocks,
     * the one in hand included, are ours. Blocks, like V2's slots, are filled and released in ring order.
     */
    @Override
    public boolean backlogAtLeast(final int frames)
    {
        if (frames < 1 || frames > capacity())
        {
            return false;
        }
        final int blocks = (frames + framesPerBlock - 1) / framesPerBlock;
        final int ahead = (blockIndex + blocks - 1) % blockCount;
        return (ring.getIntVolatile(ahead * blockSize + BLOCK_DESC_BLOCK_STATUS_OFFSET) & TP_STATUS_USER) != 0;
    }

    private void releaseBlock()
    {
        ring.putIntRelease(blockOffset + BLOCK_DESC_BLOCK_STATUS_OFFSET, TP_STATUS_KERNEL);
        blockHeld = false;
        blockIndex = RingIndex.next(blockIndex, blockCount);
    }
}
