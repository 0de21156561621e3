package io.netreduce.dataplane.port;

import java.util.Objects;

/**
 * How to open an {@link AfPacketPort}. Start from {@link #defaults(String)} and adjust with the {@code with*}
 * methods.
 *
 * @param interfaceName    interface to bind, e.g. {@code eth0}; must exist in the network namespace of the thread
 *                         that opens the port.
 * @param rxBlockSize      bytes per TPACKET_V3 receive block; a multiple of the page size. A block is handed to
 *                         user space when full or after {@code rxBlockTimeoutMs}. Default {@value #DEFAULT_RX_BLOCK_SIZE}.
 * @param rxBlockCount     receive blocks in the ring. Default {@value #DEFAULT_RX_BLOCK_COUNT} (16 MiB in all).
 * @param rxBlockTimeoutMs how long the kernel keeps a partly filled block before handing it over; bounds receive
 *                         latency at low rates. Default {@value #DEFAULT_RX_BLOCK_TIMEOUT_MS} (the minimum; the
 *                         kernel rounds up to a jiffy).
 * @param txFrameSize      bytes per TPACKET_V2 transmit slot, a multiple of 16; the largest frame sent is this
 *                         minus the 32-byte slot header (and at most MTU + 18). Default {@value #DEFAULT_TX_FRAME_SIZE};
 *                         use {@value #JUMBO_TX_FRAME_SIZE} for a 9000-byte MTU.
 * @param txFrameCount     transmit slots. Default {@value #DEFAULT_TX_FRAME_COUNT}; rounded up to fill whole ring
 *                         blocks.
 * @param promiscuous      put the interface in promiscuous mode while the port is open (PACKET_MR_PROMISC), so
 *                         frames addressed to other MACs (the workers') are received. Default on.
 * @param qdiscBypass      send with PACKET_QDISC_BYPASS, straight to the driver; faster, but tc egress rules and
 *                         qdisc back-pressure no longer apply. Default off.
 */
public record AfPacketConfiguration(
    String interfaceName,
    int rxBlockSize,
    int rxBlockCount,
    int rxBlockTimeoutMs,
    int txFrameSize,
    int txFrameCount,
    boolean promiscuous,
    boolean qdiscBypass)
{
    public static final int DEFAULT_RX_BLOCK_SIZE = 1 << 18;
    public static final int DEFAULT_RX_BLOCK_COUNT = 64;
    public static final int DEFAULT_RX_BLOCK_TIMEOUT_MS = 1;
    public static final int DEFAULT_TX_FRAME_SIZE = 2048;
    public static final int JUMBO_TX_FRAME_SIZE = 9248;
    public static final int DEFAULT_TX_FRAME_COUNT = 1024;

    public AfPacketConfiguration
    {
        Objects.requireNonNull(interfaceName, "interfaceName");
        if (interfaceName.isEmpty() || interfaceName.length() >= LinuxPacketAbi.IFNAMSIZ)
        {
            throw new IllegalArgumentException("interface name must be 1 to 15 characters: '" + interfaceName + "'");
        }
        if (rxBlockSize < 4096 || (rxBlockSize & 4095) != 0)
        {
            throw new IllegalArgumentException("rxBlockSize must be a positive multiple of 4096: " + rxBlockSize);
        }
        if (rxBlockCount < 2)
        {
            throw new IllegalArgumentException("rxBlockCount must be at least 2: " + rxBlockCount);
        }
        if (rxBlockTimeoutMs < 1)
        {
            throw new IllegalArgumentException("rxBlockTimeoutMs must be at least 1: " + rxBlockTimeoutMs);
        }
        if (txFrameSize < 128 || (txFrameSize % LinuxPacketAbi.TPACKET_ALIGNMENT) != 0)
        {
            throw new IllegalArgumentException("txFrameSize must be a multiple of 16, at least 128: " + txFrameSize);
        }
        if (txFrameCount < 1)
        {
            throw new IllegalArgumentException("txFrameCount must be positive: " + txFrameCount);
        }
        if ((long)rxBlockSize * rxBlockCount > Integer.MAX_VALUE || (long)txFrameSize * txFrameCount > (1L << 30))
        {
            throw new IllegalArgumentException("rings too large");
        }
    }

    /**
     * @return the documented defaults for {@code interfaceName}.
     */
    public static AfPacketConfiguration defaults(final String interfaceName)
    {
        return new AfPacketConfiguration(
            interfaceName,
            DEFAULT_RX_BLOCK_SIZE,
            DEFAULT_RX_BLOCK_COUNT,
            DEFAULT_RX_BLOCK_TIMEOUT_MS,
            DEFAULT_TX_FRAME_SIZE,
            DEFAULT_TX_FRAME_COUNT,
            true,
            false);
    }

    public AfPacketConfiguration withRxRing(final int blockSize, final int blockCount, final int blockTimeoutMs)
    {
        return new AfPacketConfiguration(
            interfaceName, blockSize, blockCount, blockTimeoutMs, txFrameSize, txFrameCount, promiscuous, qdiscBypass);
    }

    public AfPacketConfiguration withTxRing(final int frameSize, final int frameCount)
    {
        return new AfPacketConfiguration(
            interfaceName, rxBlockSize, rxBlockCount, rxBlockTimeoutMs, frameSize, frameCount, promiscuous, qdiscBypass);
    }

    public AfPacketConfiguration withPromiscuous(final boolean promiscuous)
    {
        return new AfPacketConfiguration(
            interfaceName, rxBlockSize, rxBlockCount, rxBlockTimeoutMs, txFrameSize, txFrameCount, promiscuous, qdiscBypass);
    }

    public AfPacketConfiguration withQdiscBypass(final boolean qdiscBypass)
    {
        return new AfPacketConfiguration(
            interfaceName, rxBlockSize, rxBlockCount, rxBlockTimeoutMs, txFrameSize, txFrameCount, promiscuous, qdiscBypass);
    }
}
