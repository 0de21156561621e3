package io.netreduce.protocol.port;

import java.util.Objects;

/**
 * How to open an {@link AfXdpPort}. Start from {@link #defaults(String)} and adjust with the {@code with*} methods.
 *
 * @param interfaceName interface to attach to, e.g. {@code eth0}; must exist in the network namespace of the
 *                      thread that opens the port.
 * @param queueId       the receive/transmit queue the socket binds; the XDP program redirects only that queue's
 *                      frames to it and passes the others to the kernel. Default 0 (veth and most test beds
 *                      have one queue; on a multi-queue NIC steer the traffic to it with ethtool).
 * @param chunkSize     bytes per UMEM chunk, a power of two from 2048 to the page size (the kernel's limit for
 *                      aligned chunks). A frame longer than a chunk less its 256-byte receive headroom arrives in
 *                      several chunks (multi-buffer) and is handed over as one contiguous copy; transmit frames
 *                      take as many consecutive chunks as they need. Default {@value #DEFAULT_CHUNK_SIZE}.
 * @param rxRingSize    entries in the RX and fill rings, a power of two; the UMEM has as many receive chunks.
 *                      Default {@value #DEFAULT_RX_RING_SIZE} (16 MiB of receive chunks, as the AF_PACKET ring).
 * @param txFrameCount  transmit slots, each enough consecutive chunks for an MTU-sized frame. Default
 *                      {@value #DEFAULT_TX_FRAME_COUNT}. The TX and completion rings are sized to hold every
 *                      chunk of every slot, so neither can overflow.
 * @param bindMode      copy, zero-copy, or zero-copy where available. Default {@link XdpBindMode#AUTO}.
 * @param attachMode    native or generic XDP hook, or native where available. Default {@link XdpAttachMode#AUTO}.
 * @param promiscuous   keep the interface promiscuous while the port is open (through a packet socket's
 *                      PACKET_MR_PROMISC membership, which ends with the socket), so frames addressed to other
 *                      MACs reach the XDP hook on a NIC. Default on.
 */
public record AfXdpConfiguration(
    String interfaceName,
    int queueId,
    int chunkSize,
    int rxRingSize,
    int txFrameCount,
    XdpBindMode bindMode,
    XdpAttachMode attachMode,
    boolean promiscuous)
{
    public static final int DEFAULT_QUEUE_ID = 0;
    public static final int DEFAULT_CHUNK_SIZE = 4096;
    public static final int DEFAULT_RX_RING_SIZE = 4096;
    public static final int DEFAULT_TX_FRAME_COUNT = 1024;

    public AfXdpConfiguration
    {
        Objects.requireNonNull(interfaceName, "interfaceName");
        Objects.requireNonNull(bindMode, "bindMode");
        Objects.requireNonNull(attachMode, "attachMode");
        if (interfaceName.isEmpty() || interfaceName.length() >= LinuxPacketAbi.IFNAMSIZ)
        {
            throw new IllegalArgumentException("interface name must be 1 to 15 characters: '" + interfaceName + "'");
        }
        if (queueId < 0)
        {
            throw new IllegalArgumentException("queueId must not be negative: " + queueId);
        }
        if (chunkSize < XdpAbi.XDP_UMEM_MIN_CHUNK_SIZE || Integer.bitCount(chunkSize) != 1 || chunkSize > 65536)
        {
            throw new IllegalArgumentException("chunkSize must be a power of two from 2048 to the page size: " + chunkSize);
        }
        if (rxRingSize < 64 || Integer.bitCount(rxRingSize) != 1 || rxRingSize > (1 << 20))
        {
            throw new IllegalArgumentException("rxRingSize must be a power of two from 64 to 2^20: " + rxRingSize);
        }
        if (txFrameCount < 1 || txFrameCount > (1 << 16))
        {
            throw new IllegalArgumentException("txFrameCount must be from 1 to 65536: " + txFrameCount);
        }
    }

    /**
     * @return the documented defaults for {@code interfaceName}.
     */
    public static AfXdpConfiguration defaults(final String interfaceName)
    {
        return new AfXdpConfiguration(interfaceName, DEFAULT_QUEUE_ID, DEFAULT_CHUNK_SIZE, DEFAULT_RX_RING_SIZE,
            DEFAULT_TX_FRAME_COUNT, XdpBindMode.AUTO, XdpAttachMode.AUTO, true);
    }

    public AfXdpConfiguration withQueueId(final int queueId)
    {
        return new AfXdpConfiguration(
            interfaceName, queueId, chunkSize, rxRingSize, txFrameCount, bindMode, attachMode, promiscuous);
    }

    public AfXdpConfiguration withChunkSize(final int chunkSize)
    {
        return new AfXdpConfiguration(
            interfaceName, queueId, chunkSize, rxRingSize, txFrameCount, bindMode, attachMode, promiscuous);
    }

    public AfXdpConfiguration withRxRingSize(final int rxRingSize)
    {
        return new AfXdpConfiguration(
            interfaceName, queueId, chunkSize, rxRingSize, txFrameCount, bindMode, attachMode, promiscuous);
    }

    public AfXdpConfiguration withTxFrameCount(final int txFrameCount)
    {
        return new AfXdpConfiguration(
            interfaceName, queueId, chunkSize, rxRingSize, txFrameCount, bindMode, attachMode, promiscuous);
    }

    public AfXdpConfiguration withBindMode(final XdpBindMode bindMode)
    {
        return new AfXdpConfiguration(
            interfaceName, queueId, chunkSize, rxRingSize, txFrameCount, bindMode, attachMode, promiscuous);
    }

    public AfXdpConfiguration withAttachMode(final XdpAttachMode attachMode)
    {
        return new AfXdpConfiguration(
            interfaceName, queueId, chunkSize, rxRingSize, txFrameCount, bindMode, attachMode, promiscuous);
    }

    public AfXdpConfiguration withPromiscuous(final boolean promiscuous)
    {
        return new AfXdpConfiguration(
            interfaceName, queueId, chunkSize, rxRingSize, txFrameCount, bindMode, attachMode, promiscuous);
    }
}
