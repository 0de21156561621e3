package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static io.netreduce.protocol.port.LinuxPacketAbi.*;

/**
 * The two sockets of an {@link AfPacketPort} and the rings mapped on them, with the steps that open them: the
 * receive socket and its ring, the transmit socket and its ring, the fanout group. It holds what has been acquired
 * so far, so a failed step can release it; once every step has succeeded the port keeps it and releases it on
 * close.
 */
final class AfPacketSockets
{
    /** {@link #fanoutGroup} of a port in no fanout group. */
    static final int NO_FANOUT = -1;
    /** {@link #fanoutGroup} asking to create a group with a kernel-chosen unique id. */
    static final int NEW_FANOUT_GROUP = -2;
    /** In V3 the frame size only sizes the kernel's bookkeeping; frames are packed by their real length. */
    private static final int V3_NOMINAL_FRAME_SIZE = 2048;
    /** The largest TX block made to hold whole slots and whole pages; past it, one page-rounded slot per block. */
    private static final long MAX_TX_BLOCK_SIZE = 1 << 22;

    /** As asked, offload off where the kernel cannot segment, the receive ring grown to hold an MTU slot. */
    private AfPacketConfiguration configuration;
    private final String name;
    private final PortSystemCalls system;
    private int ifIndex;
    private int mtu;
    private byte[] macAddress;
    private int rxFd = -1;
    private long rxRingAddress;
    private long rxRingLength;
    private int rxFrameSize;
    private int txFd = -1;
    private long txRingAddress;
    private long txRingLength;
    private int[] txSlotOffsets;
    /** The group to join (or NEW_FANOUT_GROUP, NO_FANOUT); after {@link #joinFanout}, the group joined. */
    private int fanoutGroup;

    /**
     * @param fanoutGroup the fanout group to join: a group id, {@link #NEW_FANOUT_GROUP} or {@link #NO_FANOUT}.
     *                    A member holds a drop-all socket filter from before its bind until the caller removes it.
     */
    AfPacketSockets(final AfPacketConfiguration configuration, final int fanoutGroup)
    {
        // Asked for on a kernel whose packet sockets cannot segment UDP, offload is off: frames go one per slot.
        this.configuration = configuration.segmentationOffload() &&
            !KernelRelease.current().packetSocketsSegmentUdp() ? configuration.withSegmentationOffload(false) :
            configuration;
        this.name = configuration.interfaceName();
        this.system = new PortSystemCalls(name);
        this.fanoutGroup = fanoutGroup;
    }

    AfPacketConfiguration configuration()
    {
        return configuration;
    }

    PortSystemCalls system()
    {
        return system;
    }

    int ifIndex()
    {
        return ifIndex;
    }

    int mtu()
    {
        return mtu;
    }

    byte[] macAddress()
    {
        return macAddress;
    }

    int rxFd()
    {
        return rxFd;
    }

    int txFd()
    {
        return txFd;
    }

    long rxRingAddress()
    {
        return rxRingAddress;
    }

    long rxRingLength()
    {
        return rxRingLength;
    }

    /**
     * @return the V2 receive slot size, or 0 for a V3 ring.
     */
    int rxFrameSize()
    {
        return rxFrameSize;
    }

    int fanoutGroup()
    {
        return fanoutGroup;
    }

    /**
     * @return the transmit ring over the mapping {@link #openTransmitSocket} made.
     */
    /**
     * @return the transmit socket's send buffer as the kernel keeps it (SO_SNDBUF read back: twice what was set).
     */
    int transmitSocketBuffer()
    {
        try (Arena scratch = Arena.ofConfined())
        {
            final MemorySegment value = scratch.allocate(ValueLayout.JAVA_INT);
            final MemorySegment length = scratch.allocate(ValueLayout.JAVA_INT);
            length.set(ValueLayout.JAVA_INT, 0, Integer.BYTES);
            final MemorySegment errno = Libc.allocateErrnoState(scratch);
            if (Libc.getsockopt(errno, txFd, SOL_SOCKET, SO_SNDBUF, value, length) < 0)
            {
                throw new PortException("getsockopt SO_SNDBUF on '" + name + "'", Libc.errno(errno));
            }
            return value.get(ValueLayout.JAVA_INT, 0);
        }
    }

    TpacketV2TxRing newTxRing(final PortCounters counters)
    {
        return new TpacketV2TxRing(name, txFd, system.errnoState(), txRingAddress, txRingLength, txSlotOffsets,
            configuration.txFrameSize(), mtu, configuration.segmentationOffload(), counters);
    }

    void openReceiveSocket()
    {
        try (Arena scratch = Arena.ofConfined())
        {
            ifIndex = system.interfaceIndex(scratch);

            // Protocol 0 until the ring is ready: bind() with ETH_P_ALL then starts delivery on this interface
            // only, instead of queueing frames from every interface in the meantime.
            rxFd = system.rawSocket(AF_PACKET, "AF_PACKET");
            final InterfaceInfo info = system.interfaceInfo(rxFd, scratch);
            mtu = info.mtu();
            macAddress = info.macAddress();
            configuration = configuration.withRxRingHolding(mtu);
            // Best effort (Linux 4.20+): the ring then never holds our own transmissions; receive() filters too.
            system.setIntOption(scratch, rxFd, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1, null);
            if (fanoutGroup != NO_FANOUT)
            {
                system.setOption(rxFd, SOL_SOCKET, SO_ATTACH_FILTER, ClassicBpfProgram.dropAll().toSockFprog(scratch),
                    ClassicBpfProgram.SOCK_FPROG_SIZE, "SO_ATTACH_FILTER (hold until the fanout group is complete)");
            }
            else if (configuration.roceOnly())
            {
                // Before bind: no frame of other traffic reaches the ring, not even in the first moments.
                system.setOption(rxFd, SOL_SOCKET, SO_ATTACH_FILTER,
                    RoceReceiveFilter.program().toSockFprog(scratch), ClassicBpfProgram.SOCK_FPROG_SIZE,
                    "SO_ATTACH_FILTER (RoCEv2 only)");
            }

            if (configuration.segmentationOffload())
            {
                // Before the ring: the kernel sizes each slot's header area with the vnet header in it.
                system.setIntOption(scratch, rxFd, SOL_PACKET, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR (receive)");
            }
            final int blockSize = configuration.rxBlockSize();
            final int blockCount = configuration.rxBlockCount();
            if (configuration.rxRingVersion() == RxRingVersion.V2)
            {
                setUpV2ReceiveRing(scratch, blockSize, blockCount);
            }
            else
            {
                setUpV3ReceiveRing(scratch, blockSize, blockCount);
            }

            rxRingLength = (long)blockSize * blockCount;
            rxRingAddress = system.map(rxRingLength, MAP_SHARED, rxFd, 0L, "RX ring");

            bind(scratch, rxFd, ETH_P_ALL);

            if (configuration.promiscuous())
            {
                system.addPromiscuousMembership(scratch, rxFd, ifIndex);
            }
        }
    }

    /**
     * Join the fanout group {@link #fanoutGroup}, or create one with a kernel-chosen unique id when it is
     * {@link #NEW_FANOUT_GROUP}, and keep the group's id; nothing for a port in no group.
     */
    void joinFanout()
    {
        if (fanoutGroup == NO_FANOUT)
        {
            return;
        }
        final int group = fanoutGroup;
        try (Arena scratch = Arena.ofConfined())
        {
            // Every member asks for the same flags (the kernel refuses a join whose flags differ from the
            // group's), the first one also for a unique id.
            final int flags = PACKET_FANOUT_FLAG_IGNORE_OUTGOING | (group < 0 ? PACKET_FANOUT_FLAG_UNIQUEID : 0);
            final int id = group < 0 ? 0 : group;
            system.setIntOption(scratch, rxFd, SOL_PACKET, PACKET_FANOUT,
                id | (PACKET_FANOUT_CBPF << 16) | (flags << 16),
                "PACKET_FANOUT (CBPF" + (group < 0 ? ", new group" : ", group " + group) + ")");
            if (group >= 0)
            {
                return;
            }
            final MemorySegment errnoState = system.errnoState();
            final MemorySegment value = scratch.allocate(ValueLayout.JAVA_INT);
            final MemorySegment length = scratch.allocate(ValueLayout.JAVA_INT);
            length.set(ValueLayout.JAVA_INT, 0, Integer.BYTES);
            if (Libc.getsockopt(errnoState, rxFd, SOL_PACKET, PACKET_FANOUT, value, length) < 0)
            {
                throw new PortException("getsockopt PACKET_FANOUT on '" + name + "'", Libc.errno(errnoState));
            }
            fanoutGroup = value.get(ValueLayout.JAVA_INT, 0) & 0xFFFF;
        }
    }

    private void setUpV2ReceiveRing(final Arena scratch, final int blockSize, final int blockCount)
    {
        rxFrameSize = configuration.rxFrameSizeFor(mtu);
        if (rxFrameSize > blockSize)
        {
            throw new PortException("V2 receive slot of " + rxFrameSize + " bytes (MTU " + mtu + ") does not fit " +
                "a receive block of " + blockSize + " bytes on '" + name + "': raise rxBlockSize");
        }
        system.setIntOption(scratch, rxFd, SOL_PACKET, PACKET_VERSION, TPACKET_V2, "PACKET_VERSION TPACKET_V2");
        final int frameCount = TpacketV2RxRing.frameCount(blockSize, blockCount, rxFrameSize);
        final MemorySegment request = tpacketRequest(scratch, TPACKET_REQ_SIZE, blockSize, blockCount, rxFrameSize,
            frameCount);
        system.setOption(rxFd, SOL_PACKET, PACKET_RX_RING, request, TPACKET_REQ_SIZE,
            "PACKET_RX_RING V2 (" + frameCount + " slots of " + rxFrameSize + " bytes in " + blockCount +
            " blocks of " + blockSize + ")");
    }

    private void setUpV3ReceiveRing(final Arena scratch, final int blockSize, final int blockCount)
    {
        system.setIntOption(scratch, rxFd, SOL_PACKET, PACKET_VERSION, TPACKET_V3, "PACKET_VERSION TPACKET_V3");
        final MemorySegment request = tpacketRequest(scratch, TPACKET_REQ3_SIZE, blockSize, blockCount,
            V3_NOMINAL_FRAME_SIZE, (blockSize / V3_NOMINAL_FRAME_SIZE) * blockCount);
        request.set(ValueLayout.JAVA_INT, TPACKET_REQ3_RETIRE_BLK_TOV_OFFSET, configuration.rxBlockTimeoutMs());
        request.set(ValueLayout.JAVA_INT, TPACKET_REQ3_SIZEOF_PRIV_OFFSET, 0);
        request.set(ValueLayout.JAVA_INT, TPACKET_REQ3_FEATURE_REQ_WORD_OFFSET, 0);
        system.setOption(rxFd, SOL_PACKET, PACKET_RX_RING, request, TPACKET_REQ3_SIZE,
            "PACKET_RX_RING V3 (" + blockCount + " blocks of " + blockSize + " bytes)");
    }

    void openTransmitSocket()
    {
        try (Arena scratch = Arena.ofConfined())
        {
            txFd = system.rawSocket(AF_PACKET, "AF_PACKET");
            system.setIntOption(scratch, txFd, SOL_PACKET, PACKET_VERSION, TPACKET_V2, "PACKET_VERSION TPACKET_V2");
            system.setIntOption(scratch, txFd, SOL_PACKET, PACKET_LOSS, 1, "PACKET_LOSS");
            if (configuration.qdiscBypass())
            {
                system.setIntOption(scratch, txFd, SOL_PACKET, PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS");
            }

            if (configuration.segmentationOffload())
            {
                system.setIntOption(scratch, txFd, SOL_PACKET, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR (transmit)");
            }
            final int frameSize = configuration.txFrameSize();
            final int pageSize = Libc.pageSize();
            // Slots never straddle blocks: use the smallest block holding whole slots and whole pages, unless
            // that gets large, then one page-rounded slot per block.
            long blockSize = lcm(frameSize, pageSize);
            if (blockSize > MAX_TX_BLOCK_SIZE)
            {
                blockSize = ((long)frameSize + pageSize - 1) / pageSize * pageSize;
            }
            final int framesPerBlock = (int)(blockSize / frameSize);
            final int blockCount = (configuration.txFrameCount() + framesPerBlock - 1) / framesPerBlock;
            final int frameCount = blockCount * framesPerBlock;

            final MemorySegment request = tpacketRequest(scratch, TPACKET_REQ_SIZE, (int)blockSize, blockCount,
                frameSize, frameCount);
            system.setOption(txFd, SOL_PACKET, PACKET_TX_RING, request, TPACKET_REQ_SIZE,
                "PACKET_TX_RING (" + frameCount + " slots of " + frameSize + " bytes)");

            txRingLength = blockSize * blockCount;
            txRingAddress = system.map(txRingLength, MAP_SHARED, txFd, 0L, "TX ring");
            txSlotOffsets = new int[frameCount];
            for (int i = 0; i < frameCount; i++)
            {
                txSlotOffsets[i] = (int)((i / framesPerBlock) * blockSize + (long)(i % framesPerBlock) * frameSize);
            }

            final int socketBuffer = configuration.txSocketBuffer();
            if (socketBuffer > 0)
            {
                // Root (CAP_NET_ADMIN) may pass net.core.wmem_max; anyone else gets at most that cap.
                final MemorySegment value = scratch.allocate(ValueLayout.JAVA_INT);
                value.set(ValueLayout.JAVA_INT, 0, socketBuffer);
                if (Libc.setsockopt(system.errnoState(), txFd, SOL_SOCKET, SO_SNDBUFFORCE, value, Integer.BYTES) < 0)
                {
                    system.setIntOption(scratch, txFd, SOL_SOCKET, SO_SNDBUF, socketBuffer,
                        "SO_SNDBUF (" + socketBuffer + " bytes)");
                }
            }

            // Protocol 0: this socket only sends; the kernel derives each frame's protocol from its header.
            bind(scratch, txFd, 0);
        }
    }

    /**
     * @return a struct tpacket_req (or the first four fields of a tpacket_req3, {@code size} bytes) for a ring of
     *         {@code blockCount} blocks of {@code blockSize} bytes, {@code frameCount} frames of {@code frameSize}.
     */
    private static MemorySegment tpacketRequest(
        final Arena scratch, final int size, final int blockSize, final int blockCount, final int frameSize,
        final int frameCount)
    {
        final MemorySegment request = scratch.allocate(size, 4);
        request.set(ValueLayout.JAVA_INT, TPACKET_REQ_BLOCK_SIZE_OFFSET, blockSize);
        request.set(ValueLayout.JAVA_INT, TPACKET_REQ_BLOCK_NR_OFFSET, blockCount);
        request.set(ValueLayout.JAVA_INT, TPACKET_REQ_FRAME_SIZE_OFFSET, frameSize);
        request.set(ValueLayout.JAVA_INT, TPACKET_REQ_FRAME_NR_OFFSET, frameCount);
        return request;
    }

    private void bind(final Arena scratch, final int fd, final int protocol)
    {
        final MemorySegment address = scratch.allocate(SOCKADDR_LL_SIZE, 4);
        address.set(ValueLayout.JAVA_SHORT, SOCKADDR_LL_FAMILY_OFFSET, (short)AF_PACKET);
        address.set(ValueLayout.JAVA_SHORT, SOCKADDR_LL_PROTOCOL_OFFSET, (short)htons(protocol));
        address.set(ValueLayout.JAVA_INT, SOCKADDR_LL_IFINDEX_OFFSET, ifIndex);
        final MemorySegment errnoState = system.errnoState();
        if (Libc.bind(errnoState, fd, address, SOCKADDR_LL_SIZE) < 0)
        {
            throw new PortException("bind AF_PACKET socket to '" + name + "'", Libc.errno(errnoState));
        }
    }

    /**
     * Unmap the rings and close the sockets acquired so far, then the arena: after a failed step, or on close.
     */
    void release()
    {
        if (rxRingAddress != 0)
        {
            system.unmap(rxRingAddress, rxRingLength);
        }
        if (txRingAddress != 0)
        {
            system.unmap(txRingAddress, txRingLength);
        }
        system.close(rxFd);
        system.close(txFd);
        system.release();
    }

    private static long lcm(final long a, final long b)
    {
        long x = a;
        long y = b;
        while (y != 0)
        {
            final long t = x % y;
            x = y;
            y = t;
        }
        return a / x * b;
    }
}
