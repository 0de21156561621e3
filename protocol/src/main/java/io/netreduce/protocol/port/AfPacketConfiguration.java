package io.netreduce.protocol.port;

import java.util.Objects;

/**
 * How to open an {@link AfPacketPort}. Start from {@link #defaults(String)} and adjust with the {@code with*}
 * methods.
 *
 * @param interfaceName    interface to bind, e.g. {@code eth0}; must exist in the network namespace of the thread
 *                         that opens the port.
 * @param rxRingVersion    receive ring layout. Default {@link RxRingVersion#V2}: each frame reaches user space as
 *                         soon as the kernel has written it, where V3 can hold a lone frame for its block timer
 *                         (a round trip of ~3 us against ~1 ms on a veth). Per-frame cost at high rates measured
 *                         the same within noise, but MTU-sized slots hold fewer frames per MiB than V3's packed
 *                         blocks: with a jumbo MTU, size {@code rxFrameSize} for the frames expected or add
 *                         blocks (docs/performance.md, "AF_PACKET receive latency").
 * @param rxBlockSize      bytes per receive block; a multiple of the page size. In V3 a block is handed to user
 *                         space when full or after {@code rxBlockTimeoutMs}; in V2 it is only the unit the ring's
 *                         memory comes in and must hold at least one frame slot (where an MTU-sized slot
 *                         does not fit, the port opens with larger blocks: {@link #withRxRingHolding}). Default
 *                         {@value #DEFAULT_RX_BLOCK_SIZE}.
 * @param rxBlockCount     receive blocks in the ring. Default {@value #DEFAULT_RX_BLOCK_COUNT} (16 MiB in all).
 * @param rxBlockTimeoutMs V3 only: how long the kernel keeps a partly filled block before handing it over; bounds
 *                         receive latency at low rates. Default {@value #DEFAULT_RX_BLOCK_TIMEOUT_MS} (the minimum;
 *                         the kernel rounds up to a jiffy).
 * @param rxFrameSize      V2 only: bytes per receive frame slot, a multiple of 16 and at most {@code rxBlockSize};
 *                         a frame longer than the slot less its 66-byte header area is counted as truncated and
 *                         dropped. Default {@value #AUTO_RX_FRAME_SIZE}: sized when the port opens to hold an
 *                         MTU-sized frame plus a VLAN tag (1584 bytes at MTU 1500, 9088 at 9000).
 * @param txFrameSize      bytes per TPACKET_V2 transmit slot, a multiple of 16; the largest frame sent is this
 *                         minus the 32-byte slot header (and at most MTU + 18). Default {@value #DEFAULT_TX_FRAME_SIZE};
 *                         use {@value #JUMBO_TX_FRAME_SIZE} for a 9000-byte MTU.
 * @param txFrameCount     transmit slots. Default {@value #DEFAULT_TX_FRAME_COUNT}; rounded up to fill whole ring
 *                         blocks.
 * @param promiscuous      put the interface in promiscuous mode while the port is open (PACKET_MR_PROMISC), so
 *                         frames addressed to other MACs (the workers') are received. Default on.
 * @param qdiscBypass      send with PACKET_QDISC_BYPASS, straight to the driver; faster, but tc egress rules and
 *                         qdisc back-pressure no longer apply. Default off.
 * @param segmentationOffload send and receive with PACKET_VNET_HDR: consecutive RoCEv2 frames to one destination
 *                         leave as one UDP segmentation offload frame ({@link UdpSegmentBatcher}), and such frames
 *                         arriving are split back into wire frames ({@link UdpSegmentSplitter}). Needs slots for
 *                         64 KiB frames: {@link #withSegmentationOffload} sets the rings for them (smaller
 *                         transmit slots, set after it, only make the batches shorter). Default off.
 * @param txSocketBuffer   bytes of frames the kernel may hold for the transmit socket, taken from the ring but not
 *                         yet sent (queued in a qdisc: a shaped link's tbf), as SO_SNDBUF; the kernel counts
 *                         every skb's bookkeeping too and doubles the value to allow for it. Past it the kernel
 *                         refuses the ring's frames with EAGAIN; they wait in the ring and the owner has to kick
 *                         again (it does not block while frames wait, {@link PortPoller}), so a socket buffer
 *                         smaller than what the sender keeps in flight (an RC window) turns the wait for the link
 *                         into a loop of refused {@code sendto}s and yields. Set as SO_SNDBUFFORCE where the
 *                         process has CAP_NET_ADMIN, else as SO_SNDBUF (capped by net.core.wmem_max).
 *                         Default {@value #KERNEL_TX_SOCKET_BUFFER}: the kernel's default (net.core.wmem_default,
 *                         208 KiB).
 * @param roceOnly         receive only RoCEv2 (UDP to port 4791, {@link RoceReceiveFilter}): the kernel keeps the
 *                         host's other traffic on the interface out of the receive ring, as an RDMA NIC keeps it
 *                         from its queue pairs. For a port that serves RoCE endpoints only (a worker's); an
 *                         appliance's port forwards other traffic and must see it. Default off.
 */
public record AfPacketConfiguration(
    String interfaceName,
    RxRingVersion rxRingVersion,
    int rxBlockSize,
    int rxBlockCount,
    int rxBlockTimeoutMs,
    int rxFrameSize,
    int txFrameSize,
    int txFrameCount,
    boolean promiscuous,
    boolean qdiscBypass,
    boolean segmentationOffload,
    int txSocketBuffer,
    boolean roceOnly)
{
    public static final RxRingVersion DEFAULT_RX_RING_VERSION = RxRingVersion.V2;
    public static final int DEFAULT_RX_BLOCK_SIZE = 1 << 18;
    public static final int DEFAULT_RX_BLOCK_COUNT = 64;
    public static final int DEFAULT_RX_BLOCK_TIMEOUT_MS = 1;
    /** {@link #rxFrameSize()} value asking for V2 slots sized from the interface MTU when the port opens. */
    public static final int AUTO_RX_FRAME_SIZE = 0;
    /** Smallest explicit V2 slot: the 66-byte header area plus a minimum-size Ethernet frame, rounded up. */
    public static final int MIN_RX_FRAME_SIZE = 128;
    public static final int DEFAULT_TX_FRAME_SIZE = 2048;
    public static final int JUMBO_TX_FRAME_SIZE = 9248;
    public static final int DEFAULT_TX_FRAME_COUNT = 1024;
    /** {@link #txSocketBuffer()} value leaving the transmit socket's buffer at the kernel's default. */
    public static final int KERNEL_TX_SOCKET_BUFFER = 0;
    /** Transmit slot with segmentation offload: a 64 KiB frame, its vnet header and the slot header, in pages. */
    public static final int SEGMENTATION_TX_FRAME_SIZE = 69632;
    public static final int SEGMENTATION_RX_BLOCK_SIZE = 1 << 20;
    public static final int SEGMENTATION_RX_BLOCK_COUNT = 64;
    /** Receive blocks of {@link #withRxForWireFrames}. */
    public static final int WIRE_FRAMES_RX_BLOCK_COUNT = 128;
    /** Longest frame a port with segmentation offload receives whole: Ethernet, a VLAN tag, a 64 KiB IP datagram. */
    public static final int SEGMENTATION_MAX_FRAME_LENGTH = LinuxPacketAbi.ETH_HLEN + LinuxPacketAbi.VLAN_HLEN + 0xFFFF;

    public AfPacketConfiguration
    {
        Objects.requireNonNull(interfaceName, "interfaceName");
        Objects.requireNonNull(rxRingVersion, "rxRingVersion");
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
        if (rxFrameSize != AUTO_RX_FRAME_SIZE &&
            (rxFrameSize < MIN_RX_FRAME_SIZE || (rxFrameSize % LinuxPacketAbi.TPACKET_ALIGNMENT) != 0 ||
            rxFrameSize > rxBlockSize))
        {
            throw new IllegalArgumentException("rxFrameSize must be 0 (from the MTU) or a multiple of 16 from " +
                MIN_RX_FRAME_SIZE + " to rxBlockSize (" + rxBlockSize + "): " + rxFrameSize);
        }
        if (txFrameSize < 128 || (txFrameSize % LinuxPacketAbi.TPACKET_ALIGNMENT) != 0)
        {
            throw new IllegalArgumentException("txFrameSize must be a multiple of 16, at least 128: " + txFrameSize);
        }
        if (txFrameCount < 1)
        {
            throw new IllegalArgumentException("txFrameCount must be positive: " + txFrameCount);
        }
        if (txSocketBuffer < 0)
        {
            throw new IllegalArgumentException("txSocketBuffer must be 0 (the kernel's default) or positive: " +
                txSocketBuffer);
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
            DEFAULT_RX_RING_VERSION,
            DEFAULT_RX_BLOCK_SIZE,
            DEFAULT_RX_BLOCK_COUNT,
            DEFAULT_RX_BLOCK_TIMEOUT_MS,
            AUTO_RX_FRAME_SIZE,
            DEFAULT_TX_FRAME_SIZE,
            DEFAULT_TX_FRAME_COUNT,
            true,
            false,
            false,
            KERNEL_TX_SOCKET_BUFFER,
            false);
    }

    /**
     * @return this configuration for the interface {@code name} (the daemon's warm-up opens its ports' settings on
     *         the loopback interface).
     */
    public AfPacketConfiguration withInterfaceName(final String name)
    {
        return new AfPacketConfiguration(name, rxRingVersion, rxBlockSize, rxBlockCount, rxBlockTimeoutMs,
            rxFrameSize, txFrameSize, txFrameCount, promiscuous, qdiscBypass, segmentationOffload, txSocketBuffer,
            roceOnly);
    }

    /**
     * @return this configuration with the receive ring layout {@code version}.
     */
    public AfPacketConfiguration withRxRingVersion(final RxRingVersion version)
    {
        return new AfPacketConfiguration(interfaceName, version, rxBlockSize, rxBlockCount, rxBlockTimeoutMs,
            rxFrameSize, txFrameSize, txFrameCount, promiscuous, qdiscBypass, segmentationOffload, txSocketBuffer,
            roceOnly);
    }

    /**
     * @return this configuration with receive blocks of {@code blockSize} bytes, {@code blockCount} of them, and
     *         (V3) a block timeout of {@code blockTimeoutMs}.
     */
    public AfPacketConfiguration withRxRing(final int blockSize, final int blockCount, final int blockTimeoutMs)
    {
        return new AfPacketConfiguration(interfaceName, rxRingVersion, blockSize, blockCount, blockTimeoutMs,
            rxFrameSize, txFrameSize, txFrameCount, promiscuous, qdiscBypass, segmentationOffload, txSocketBuffer,
            roceOnly);
    }

    /**
     * @return this configuration with V2 receive slots of {@code frameSize} bytes ({@link #AUTO_RX_FRAME_SIZE}:
     *         from the MTU).
     */
    public AfPacketConfiguration withRxFrameSize(final int frameSize)
    {
        return new AfPacketConfiguration(interfaceName, rxRingVersion, rxBlockSize, rxBlockCount, rxBlockTimeoutMs,
            frameSize, txFrameSize, txFrameCount, promiscuous, qdiscBypass, segmentationOffload, txSocketBuffer,
            roceOnly);
    }

    /**
     * @return this configuration with a transmit socket buffer of {@code bytes} ({@link #KERNEL_TX_SOCKET_BUFFER}:
     *         the kernel's default); see {@link #txSocketBuffer()}.
     */
    public AfPacketConfiguration withTxSocketBuffer(final int bytes)
    {
        return new AfPacketConfiguration(interfaceName, rxRingVersion, rxBlockSize, rxBlockCount, rxBlockTimeoutMs,
            rxFrameSize, txFrameSize, txFrameCount, promiscuous, qdiscBypass, segmentationOffload, bytes, roceOnly);
    }

    public AfPacketConfiguration withTxRing(final int frameSize, final int frameCount)
    {
        return new AfPacketConfiguration(interfaceName, rxRingVersion, rxBlockSize, rxBlockCount, rxBlockTimeoutMs,
            rxFrameSize, frameSize, frameCount, promiscuous, qdiscBypass, segmentationOffload, txSocketBuffer,
            roceOnly);
    }

    /**
     * @return this configuration with segmentation offload on or off; on, the transmit ring's slots grow to
     *         {@value #SEGMENTATION_TX_FRAME_SIZE} bytes (as many as before: a slot a batch can hold 15 frames of
     *         4 KiB, but a run of single frames, ACKs among them, still takes one each, and a slot stays taken
     *         while its frame waits in a qdisc; 1024 slots take 68 MiB) and the
     *         (V2) receive ring slots for 64 KiB frames in blocks of {@value #SEGMENTATION_RX_BLOCK_SIZE} bytes,
     *         {@value #SEGMENTATION_RX_BLOCK_COUNT} of them (960 slots, each holding up to 15 frames of 4 KiB payload).
     */
    public AfPacketConfiguration withSegmentationOffload(final boolean segmentationOffload)
    {
        if (!segmentationOffload)
        {
            return new AfPacketConfiguration(interfaceName, rxRingVersion, rxBlockSize, rxBlockCount,
                rxBlockTimeoutMs, rxFrameSize, txFrameSize, txFrameCount, promiscuous, qdiscBypass, false,
                txSocketBuffer, roceOnly);
        }
        return new AfPacketConfiguration(interfaceName, rxRingVersion, SEGMENTATION_RX_BLOCK_SIZE,
            SEGMENTATION_RX_BLOCK_COUNT, rxBlockTimeoutMs,
            rxFrameSizeForFrames(VirtioNetHeader.LENGTH + SEGMENTATION_MAX_FRAME_LENGTH), SEGMENTATION_TX_FRAME_SIZE,
            txFrameCount, promiscuous, qdiscBypass, true, txSocketBuffer, roceOnly);
    }

    /**
     * @return this configuration with a receive ring of {@value #WIRE_FRAMES_RX_BLOCK_COUNT} blocks of
     *         {@value #DEFAULT_RX_BLOCK_SIZE} bytes (32 MiB) and receive slots sized for MTU frames behind the virtio
     *         header: for a port with segmentation offload whose neighbours send wire frames (a NIC; the test bed's
     *         workers, whose own kernels segment what they send), such as the appliance's. 64 KiB slots would cut
     *         the ring to 960 frames, fewer than the packets eight ranks may have in flight with window 8 and
     *         MsgLen 16 (1024): measured, 7431 frames dropped at the appliance's ring in one run of ten 64 MiB
     *         all-reduces at W = 8. 32 MiB holds 3584 frames at MTU 9000: eight ranks' windows of 16 messages of 16
     *         packets (2048) and their ACKs. A frame longer than the MTU (a neighbour's offload frame) is counted
     *         truncated and dropped.
     */
    public AfPacketConfiguration withRxForWireFrames()
    {
        return new AfPacketConfiguration(interfaceName, rxRingVersion, DEFAULT_RX_BLOCK_SIZE,
            WIRE_FRAMES_RX_BLOCK_COUNT, rxBlockTimeoutMs, AUTO_RX_FRAME_SIZE, txFrameSize, txFrameCount, promiscuous,
            qdiscBypass, segmentationOffload, txSocketBuffer, roceOnly);
    }

    public AfPacketConfiguration withPromiscuous(final boolean promiscuous)
    {
        return new AfPacketConfiguration(interfaceName, rxRingVersion, rxBlockSize, rxBlockCount, rxBlockTimeoutMs,
            rxFrameSize, txFrameSize, txFrameCount, promiscuous, qdiscBypass, segmentationOffload, txSocketBuffer,
            roceOnly);
    }

    /**
     * @return this configuration receiving only RoCEv2 frames, or every frame; see {@link #roceOnly()}.
     */
    public AfPacketConfiguration withRoceOnly(final boolean roceOnly)
    {
        return new AfPacketConfiguration(interfaceName, rxRingVersion, rxBlockSize, rxBlockCount, rxBlockTimeoutMs,
            rxFrameSize, txFrameSize, txFrameCount, promiscuous, qdiscBypass, segmentationOffload, txSocketBuffer,
            roceOnly);
    }

    public AfPacketConfiguration withQdiscBypass(final boolean qdiscBypass)
    {
        return new AfPacketConfiguration(interfaceName, rxRingVersion, rxBlockSize, rxBlockCount, rxBlockTimeoutMs,
            rxFrameSize, txFrameSize, txFrameCount, promiscuous, qdiscBypass, segmentationOffload, txSocketBuffer,
            roceOnly);
    }

    /**
     * @return the V2 slot size to use on an interface with {@code mtu}: {@link #rxFrameSize()} if set, else
     *         {@link #rxFrameSizeForFrames} of an Ethernet header, a VLAN tag and {@code mtu} bytes (behind the
     *         virtio header with segmentation offload).
     */
    public int rxFrameSizeFor(final int mtu)
    {
        if (rxFrameSize != AUTO_RX_FRAME_SIZE)
        {
            return rxFrameSize;
        }
        return rxFrameSizeForFrames((segmentationOffload ? VirtioNetHeader.LENGTH : 0) + LinuxPacketAbi.ETH_HLEN +
            LinuxPacketAbi.VLAN_HLEN + mtu);
    }

    /**
     * @param mtu the interface's MTU.
     * @return this configuration, or, where its V2 slot for {@code mtu} is sized from the MTU
     *         ({@link #AUTO_RX_FRAME_SIZE}) and does not fit a block, one with the receive ring of a port with
     *         segmentation offload: blocks of {@value #SEGMENTATION_RX_BLOCK_SIZE} bytes, as many as hold this
     *         ring's bytes and at least {@value #SEGMENTATION_RX_BLOCK_COUNT} (64 MiB, 960 slots at MTU 65536).
     *         An MTU above about 16 KiB ({@code lo}'s 65536, an interface with a large jumbo MTU) otherwise left
     *         a port without offload unable to open, and no option of the worker's commands or the daemon's
     *         configuration sets the block size. A slot size set explicitly is kept as asked (and refused where
     *         it cannot fit).
     */
    public AfPacketConfiguration withRxRingHolding(final int mtu)
    {
        final int slot = rxFrameSizeFor(mtu);
        if (rxRingVersion != RxRingVersion.V2 || rxFrameSize != AUTO_RX_FRAME_SIZE || slot <= rxBlockSize ||
            slot > SEGMENTATION_RX_BLOCK_SIZE)
        {
            return this;
        }
        final long ringBytes = (long)rxBlockSize * rxBlockCount;
        final int blocks = (int)Math.max(SEGMENTATION_RX_BLOCK_COUNT,
            (ringBytes + SEGMENTATION_RX_BLOCK_SIZE - 1) / SEGMENTATION_RX_BLOCK_SIZE);
        return new AfPacketConfiguration(interfaceName, rxRingVersion, SEGMENTATION_RX_BLOCK_SIZE, blocks,
            rxBlockTimeoutMs, rxFrameSize, txFrameSize, txFrameCount, promiscuous, qdiscBypass, segmentationOffload,
            txSocketBuffer, roceOnly);
    }

    /**
     * @param maxFrameLength the longest frame (Ethernet header on) the port must receive whole.
     * @return the smallest V2 slot holding it: the kernel's 66-byte header area in front, 16-byte aligned.
     */
    public static int rxFrameSizeForFrames(final int maxFrameLength)
    {
        final int needed = LinuxPacketAbi.TPACKET2_RX_ETHERNET_MAC_OFFSET + maxFrameLength;
        return Math.max(MIN_RX_FRAME_SIZE, (needed + LinuxPacketAbi.TPACKET_ALIGNMENT - 1) &
            -LinuxPacketAbi.TPACKET_ALIGNMENT);
    }
}
