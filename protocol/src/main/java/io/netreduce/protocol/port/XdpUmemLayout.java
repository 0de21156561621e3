package io.netreduce.protocol.port;

import static io.netreduce.protocol.port.LinuxPacketAbi.ETH_HLEN;
import static io.netreduce.protocol.port.LinuxPacketAbi.VLAN_HLEN;

/**
 * How an {@link AfXdpPort} cuts its UMEM into chunks of {@link AfXdpConfiguration#chunkSize()} bytes, and the ring
 * sizes that follow. The first {@code rxRingSize} chunks receive, one frame (or one piece of a multi-buffer frame)
 * each; the rest is {@code txFrameCount} transmit slots of as many consecutive chunks as an MTU-sized frame needs.
 * Worked out once, when the port opens; immutable.
 */
final class XdpUmemLayout
{
    private final int chunkSize;
    private final int rxChunks;
    private final int txSlotCount;
    private final int txSlotChunks;
    private final int maxFrameLength;

    /**
     * @param mtu the interface's MTU: a transmit slot holds MTU + Ethernet header + one VLAN tag.
     * @throws PortException if a chunk is larger than a page (the kernel refuses those) or the UMEM is larger than
     *                       one buffer with an int capacity can address.
     */
    XdpUmemLayout(final AfXdpConfiguration configuration, final int mtu)
    {
        final String name = configuration.interfaceName();
        chunkSize = configuration.chunkSize();
        if (chunkSize > Libc.pageSize())
        {
            throw new PortException("UMEM chunk of " + chunkSize + " bytes exceeds the page size " +
                Libc.pageSize() + " on '" + name + "'");
        }
        maxFrameLength = mtu + ETH_HLEN + VLAN_HLEN;
        txSlotChunks = (maxFrameLength + chunkSize - 1) / chunkSize;
        rxChunks = configuration.rxRingSize();
        txSlotCount = configuration.txFrameCount();
        if (length() > Integer.MAX_VALUE)
        {
            throw new PortException("UMEM of " + length() + " bytes too large for '" + name + "'");
        }
    }

    int chunkSize()
    {
        return chunkSize;
    }

    /**
     * @return whether a frame of {@link #maxFrameLength()} can span chunks: on receive, a chunk holds at most
     *         {@code chunkSize - XDP_PACKET_HEADROOM} bytes of frame; on transmit, a slot of more than one chunk. Only
     *         then does the socket need multi-buffer frames (XDP_USE_SG, Linux 6.6 and later); an MTU that fits a
     *         chunk (1500 with 4 KiB chunks) binds without it, so kernels before 6.6 (Debian 12's 6.1) work.
     */
    boolean needsMultiBuffer()
    {
        return maxFrameLength > chunkSize - XdpAbi.XDP_PACKET_HEADROOM || txSlotChunks > 1;
    }

    /**
     * @return chunks that receive, which start at address 0; also the size of the fill and RX rings, so every one
     *         of them can be with the kernel at once.
     */
    int rxChunks()
    {
        return rxChunks;
    }

    /**
     * @return chunks in the UMEM: receive chunks and transmit slots.
     */
    int chunkCount()
    {
        return rxChunks + txSlotCount * txSlotChunks;
    }

    /**
     * @return bytes in the UMEM.
     */
    long length()
    {
        return (long)chunkCount() * chunkSize;
    }

    /**
     * @return the UMEM address of the first transmit slot, just past the receive chunks.
     */
    int txSlotBase()
    {
        return rxChunks * chunkSize;
    }

    int txSlotCount()
    {
        return txSlotCount;
    }

    /**
     * @return bytes in a transmit slot: whole chunks, one TX descriptor each.
     */
    int txSlotSize()
    {
        return txSlotChunks * chunkSize;
    }

    /**
     * @return the size of the TX and completion rings: a power of two at least as large as the transmit chunks that
     *         can be outstanding, so neither ring can overflow.
     */
    int txRingSize()
    {
        return Integer.highestOneBit(Math.max(1, txSlotCount * txSlotChunks * 2 - 1));
    }

    /**
     * @return the longest frame sent or received: MTU + Ethernet header + one VLAN tag.
     */
    int maxFrameLength()
    {
        return maxFrameLength;
    }
}
