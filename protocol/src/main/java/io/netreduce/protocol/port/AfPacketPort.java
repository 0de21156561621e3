package io.netreduce.protocol.port;

import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import static io.netreduce.protocol.port.LinuxPacketAbi.*;

/**
 * A {@link PacketPort} over Linux AF_PACKET sockets with PACKET_MMAP rings, bound to one interface, written with
 * the FFM API (no JNI).
 * <p>
 * Receive uses one socket bound with ETH_P_ALL and a ring of the configured {@link RxRingVersion}. With TPACKET_V2
 * (the default) the ring is fixed-size frame slots, each handed over on its own as soon as the kernel has written
 * it ({@link TpacketV2RxRing}). With TPACKET_V3 the kernel packs frames into blocks and hands a block over when it
 * is full or its timeout expires; {@link #receive} walks the frames of blocks it owns and gives each block back
 * once every frame in it has been delivered ({@link TpacketV3RxRing}). Either way a batch limit can stop anywhere.
 * Frames the host sent itself (sll_pkttype PACKET_OUTGOING) are skipped, also asked of the kernel with
 * PACKET_IGNORE_OUTGOING.
 * <p>
 * Transmit uses a TPACKET_V2 ring on a second socket (the ring version is per socket, and V3 transmit rings are
 * more restrictive); that socket is bound with protocol 0 so it receives nothing. {@link #send} copies a frame
 * into the next free slot and marks it for sending; {@link #flush} kicks the kernel with one non-blocking
 * {@code sendto} and counts the slots it took. PACKET_LOSS is set so a frame the kernel rejects is skipped instead
 * of stalling the ring.
 * <p>
 * The sockets belong to the network namespace of the thread that calls {@link #open}; see {@link NetworkNamespace}.
 * After opening, one thread owns the port. {@link #receive}, {@link #send} and {@link #flush} do not allocate.
 * Close from the owning thread (or once it has stopped using the port): the ring memory is unmapped.
 */
public final class AfPacketPort implements PollablePort
{
    /** {@link #receive} reads the kernel's drop statistics once per this many calls. */
    private static final int STATISTICS_INTERVAL_CALLS = 4096;
    /** pollfd.events bit: readable. */
    private static final short POLLIN = 0x1;
    private static final int POLLFD_SIZE = 8;
    /** The kernel's limit on sockets in one fanout group (PACKET_FANOUT_MAX). */
    public static final int MAX_FANOUT_MEMBERS = 256;

    private final AfPacketConfiguration configuration;
    private final int ifIndex;
    private final int mtu;
    private final byte[] macAddress;
    private final PortCounters counters = new PortCounters();
    private final Arena arena;
    private final MemorySegment errnoState;
    private final MemorySegment statistics;
    private final MemorySegment statisticsLength;
    private final MemorySegment pollFd;

    private final int rxFd;
    private final long rxRingAddress;
    private final long rxRingLength;
    private final UnsafeBuffer rxRing;
    private final int rxFrameSize;
    private final RxRing rxReader;

    private final int txFd;
    private final long txRingAddress;
    private final long txRingLength;
    private final UnsafeBuffer txRing;
    private final int[] txSlotOffsets;
    private final int[] txSlotLengths;
    /** Wire frames in each queued slot: more than one for a segmentation offload batch. */
    private final int[] txSlotFrames;
    private final int maxTxFrameLength;
    /** Bytes in front of each frame in a slot: the virtio_net_hdr with segmentation offload, else none. */
    private final int vnetHeaderLength;
    private final UdpSegmentBatcher batcher;
    private final UdpSegmentSplitter splitter;

    private int receiveCalls;
    private final int fanoutGroup;

    private int txHead;
    private int txPendingStart;
    private int txPendingCount;
    private int claimLength;

    private boolean closed;

    private AfPacketPort(final Builder b)
    {
        configuration = b.configuration;
        ifIndex = b.ifIndex;
        mtu = b.mtu;
        macAddress = b.macAddress;
        arena = b.arena;
        errnoState = b.errnoState;
        statistics = arena.allocate(TPACKET_STATS_V3_SIZE, 8);
        statisticsLength = arena.allocate(ValueLayout.JAVA_INT);
        pollFd = arena.allocate(POLLFD_SIZE, 8);
        rxFd = b.rxFd;
        fanoutGroup = b.fanoutGroup;
        rxRingAddress = b.rxRingAddress;
        rxRingLength = b.rxRingLength;
        rxRing = new UnsafeBuffer(rxRingAddress, (int)rxRingLength);
        rxFrameSize = b.rxFrameSize;
        rxReader = configuration.rxRingVersion() == RxRingVersion.V2 ?
            new TpacketV2RxRing(rxRing, configuration.rxBlockSize(), configuration.rxBlockCount(), rxFrameSize, counters) :
            new TpacketV3RxRing(rxRing, configuration.rxBlockSize(), configuration.rxBlockCount(), counters);
        txFd = b.txFd;
        txRingAddress = b.txRingAddress;
        txRingLength = b.txRingLength;
        txRing = new UnsafeBuffer(txRingAddress, (int)txRingLength);
        txSlotOffsets = b.txSlotOffsets;
        txSlotLengths = new int[txSlotOffsets.length];
        txSlotFrames = new int[txSlotOffsets.length];
        final boolean offload = configuration.segmentationOffload();
        vnetHeaderLength = offload ? VirtioNetHeader.LENGTH : 0;
        batcher = offload ? new UdpSegmentBatcher(txRing, counters,
            configuration.txFrameSize() - TPACKET2_TX_DATA_OFFSET - VirtioNetHeader.LENGTH) : null;
        splitter = offload ? new UdpSegmentSplitter(counters) : null;
        maxTxFrameLength = Math.min(configuration.txFrameSize() - TPACKET2_TX_DATA_OFFSET - vnetHeaderLength,
            mtu + ETH_HLEN + VLAN_HLEN);

        pollFd.set(ValueLayout.JAVA_INT, 0, rxFd);
        pollFd.set(ValueLayout.JAVA_SHORT, 4, POLLIN);
    }

    /**
     * Open a port on {@code configuration.interfaceName()} in the calling thread's network namespace.
     *
     * @throws PortException naming the failed step and its errno text: no such interface, no CAP_NET_RAW (EPERM),
     *                       rings the kernel refuses, mmap failure.
     */
    public static AfPacketPort open(final AfPacketConfiguration configuration)
    {
        return open(new Builder(configuration, Builder.NO_FANOUT));
    }

    private static AfPacketPort open(final Builder builder)
    {
        try
        {
            builder.openReceiveSocket();
            builder.openTransmitSocket();
            builder.joinFanout();
            return new AfPacketPort(builder);
        }
        catch (final RuntimeException | Error ex)
        {
            builder.release();
            throw ex;
        }
    }

    /**
     * Open {@code members} ports on one interface whose receive sockets form one AF_PACKET fanout group in
     * PACKET_FANOUT_CBPF mode: the kernel hands each received frame to exactly one member, the one a classic BPF
     * classifier names ({@link #steer}); until a classifier is set every frame goes to member 0. Each member has
     * its own receive and transmit rings, so each can be owned by its own thread (a dataplane lane) with no frame
     * ever copied between them.
     * <p>
     * A receive socket receives as soon as it is bound, and it can join a group only once bound; so that no
     * frame reaches two members, every member's socket holds a drop-everything socket filter from before its
     * bind until all members have joined.
     *
     * @return the members, index i being fanout member i (the classifier's return value).
     * @throws PortException as {@link #open} does, or naming the fanout step that failed (no PACKET_FANOUT_CBPF
     *                       or unique group ids before Linux 4.8).
     */
    public static List<AfPacketPort> openFanout(final AfPacketConfiguration configuration, final int members)
    {
        if (members < 1 || members > MAX_FANOUT_MEMBERS)
        {
            throw new IllegalArgumentException("fanout members must be 1 to " + MAX_FANOUT_MEMBERS + ": " + members);
        }
        final List<AfPacketPort> ports = new ArrayList<>(members);
        try
        {
            int group = Builder.NEW_FANOUT_GROUP;
            for (int i = 0; i < members; i++)
            {
                final AfPacketPort port = open(new Builder(configuration, group));
                ports.add(port);
                group = port.fanoutGroup;
            }
            for (final AfPacketPort port : ports)
            {
                port.detachSocketFilter();
            }
            return List.copyOf(ports);
        }
        catch (final RuntimeException | Error ex)
        {
            ports.forEach(AfPacketPort::close);
            throw ex;
        }
    }

    /**
     * Replace the classifier of this port's fanout group (any member may; it applies to all at once, for frames
     * the kernel has not yet handed over). Control-side call: it is a setsockopt, not a hot-path operation.
     *
     * @throws IllegalStateException if the port was not opened with {@link #openFanout}.
     * @throws PortException         if the kernel refuses the program.
     */
    public void steer(final ClassicBpfProgram program)
    {
        if (fanoutGroup < 0)
        {
            throw new IllegalStateException("port " + name() + " is not in a fanout group");
        }
        try (Arena scratch = Arena.ofConfined())
        {
            final MemorySegment errno = Libc.allocateErrnoState(scratch);
            if (Libc.setsockopt(errno, rxFd, SOL_PACKET, PACKET_FANOUT_DATA, program.toSockFprog(scratch),
                ClassicBpfProgram.SOCK_FPROG_SIZE) < 0)
            {
                throw new PortException("setsockopt PACKET_FANOUT_DATA (" + program.length() +
                    " instruction steering program) on '" + name() + "'", Libc.errno(errno));
            }
        }
    }

    /**
     * @return the fanout group id the kernel gave this port's receive socket, or -1 if it is in none.
     */
    public int fanoutGroup()
    {
        return fanoutGroup;
    }

    private void detachSocketFilter()
    {
        try (Arena scratch = Arena.ofConfined())
        {
            final MemorySegment errno = Libc.allocateErrnoState(scratch);
            final MemorySegment unused = scratch.allocate(ValueLayout.JAVA_INT);
            if (Libc.setsockopt(errno, rxFd, SOL_SOCKET, SO_DETACH_FILTER, unused, Integer.BYTES) < 0)
            {
                throw new PortException("setsockopt SO_DETACH_FILTER on '" + name() + "'", Libc.errno(errno));
            }
        }
    }

    /**
     * Open a port with {@link AfPacketConfiguration#defaults(String) default} settings.
     */
    public static AfPacketPort open(final String interfaceName)
    {
        return open(AfPacketConfiguration.defaults(interfaceName));
    }

    @Override
    public String name()
    {
        return configuration.interfaceName();
    }

    public AfPacketConfiguration configuration()
    {
        return configuration;
    }

    /**
     * @return the interface index the sockets are bound to.
     */
    public int ifIndex()
    {
        return ifIndex;
    }

    /**
     * @return the interface MTU read when the port was opened.
     */
    public int mtu()
    {
        return mtu;
    }

    /**
     * @return a copy of the interface's MAC address read when the port was opened (6 bytes).
     */
    public byte[] macAddress()
    {
        return macAddress.clone();
    }

    /**
     * @return the V2 receive slot size in use (from the MTU unless configured); 0 for a V3 ring, whose frames
     *         are packed by length.
     */
    public int rxFrameSize()
    {
        return rxFrameSize;
    }

    /**
     * @return the longest frame {@link #send} accepts: the TX slot size less its header, and at most
     *         MTU + Ethernet header + one VLAN tag (the kernel's own limit).
     */
    public int maxTxFrameLength()
    {
        return maxTxFrameLength;
    }

    @Override
    public PortCounters counters()
    {
        return counters;
    }

    @Override
    public int receive(final FrameHandler handler, final int limit)
    {
        if (closed)
        {
            return 0;
        }
        if (++receiveCalls >= STATISTICS_INTERVAL_CALLS)
        {
            receiveCalls = 0;
            refreshKernelStatistics();
        }

        return rxReader.read(splitter == null ? handler : splitter.handler(handler), limit);
    }

    @Override
    public int tryClaim(final int length)
    {
        claimLength = 0;
        if (closed || length < ETH_HLEN || length > maxTxFrameLength)
        {
            counters.add(PortCounters.TX_ERRORS, 1);
            return -1;
        }
        final int slotOffset = txSlotOffsets[txHead];
        if (txPendingCount == txSlotOffsets.length ||
            txRing.getIntVolatile(slotOffset + TPACKET2_HDR_STATUS_OFFSET) != TP_STATUS_AVAILABLE)
        {
            counters.add(PortCounters.TX_RING_FULL, 1);
            return -1;
        }
        claimLength = length;
        return slotOffset + TPACKET2_TX_DATA_OFFSET + vnetHeaderLength;
    }

    @Override
    public MutableDirectBuffer claimBuffer()
    {
        return txRing;
    }

    @Override
    public void commit()
    {
        final int length = claimLength;
        if (length == 0)
        {
            throw new IllegalStateException("commit without a claim on " + name());
        }
        claimLength = 0;
        final int slot = txHead;
        final int slotOffset = txSlotOffsets[slot];
        final UdpSegmentBatcher batcher = this.batcher;
        if (batcher != null)
        {
            final int frame = slotOffset + TPACKET2_TX_DATA_OFFSET + VirtioNetHeader.LENGTH;
            if (batcher.tryAppend(frame, length))
            {
                // Copied into an open batch's slot; this slot stays free for the next claim.
                final int batchSlot = batcher.appendedSlot();
                txSlotLengths[batchSlot] += length;
                txSlotFrames[batchSlot]++;
                return;
            }
            batcher.queue(slot, slotOffset, frame, length);
        }
        else
        {
            LinuxPacketAbi.requestSend(txRing, slotOffset, length);
        }
        txSlotLengths[slot] = length;
        txSlotFrames[slot] = 1;
        txHead = slot + 1 == txSlotOffsets.length ? 0 : slot + 1;
        txPendingCount++;
    }

    /**
     * Kick the transmit ring and count the frames the kernel took. Frames the kernel could not take yet (queue
     * full, interface down) stay queued and go with a later flush.
     *
     * @return frames handed to the kernel by this call.
     */
    @Override
    public int flush()
    {
        if (closed || txPendingCount == 0)
        {
            return 0;
        }
        if (batcher != null)
        {
            batcher.closeAll();
        }

        if (Libc.sendKick(errnoState, txFd, MSG_DONTWAIT) < 0)
        {
            final int errno = Libc.errno(errnoState);
            if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
            {
                counters.add(PortCounters.TX_ERRORS, 1);
            }
        }

        // The kernel takes SEND_REQUEST slots strictly in ring order, so the taken ones lead the pending run.
        final UnsafeBuffer ring = txRing;
        int taken = 0;
        while (txPendingCount > 0)
        {
            final int slot = txPendingStart;
            final int status = ring.getIntVolatile(txSlotOffsets[slot] + TPACKET2_HDR_STATUS_OFFSET);
            if (status == TP_STATUS_SEND_REQUEST)
            {
                break;
            }
            final int frames = txSlotFrames[slot];
            counters.onFrameTransmitted(txSlotLengths[slot]);
            if (frames > 1)
            {
                counters.add(PortCounters.TX_FRAMES, frames - 1);
            }
            taken += frames;
            txPendingCount--;
            txPendingStart = slot + 1 == txSlotOffsets.length ? 0 : slot + 1;
        }

        return taken;
    }

    /**
     * Wait, without spinning, until a receive frame (V2) or block (V3) is ready or {@code timeoutMs} passes: for idle strategies that
     * park on the socket instead of busy polling.
     *
     * @return true if {@link #receive} may have frames to deliver.
     */
    /** The receive socket, for {@link PortPoller}. */
    @Override
    public int receiveFd()
    {
        return rxFd;
    }

    /** Whether the receive ring holds frames not yet handed over (no system call). */
    @Override
    public boolean hasReceiveWork()
    {
        return !closed && rxReader.hasWork();
    }

    /** Whether frames are queued on the transmit ring that the kernel has not taken yet. */
    @Override
    public boolean hasPendingTransmit()
    {
        return txPendingCount > 0;
    }

    public boolean awaitReceive(final int timeoutMs)
    {
        if (closed)
        {
            return false;
        }
        if (rxReader.hasWork())
        {
            return true;
        }
        return Libc.poll(errnoState, pollFd, 1, timeoutMs) > 0;
    }

    /**
     * Fold the kernel's receive drop count (PACKET_STATISTICS, which resets on read) into {@code rx_dropped}.
     * {@link #receive} does this every few thousand calls; call it directly before reading counters for a report.
     * Owning thread only.
     */
    public void refreshKernelStatistics()
    {
        if (closed)
        {
            return;
        }
        statisticsLength.set(ValueLayout.JAVA_INT, 0, TPACKET_STATS_V3_SIZE);
        if (Libc.getsockopt(errnoState, rxFd, SOL_PACKET, PACKET_STATISTICS, statistics, statisticsLength) == 0)
        {
            final int drops = statistics.get(ValueLayout.JAVA_INT, TPACKET_STATS_DROPS_OFFSET);
            if (drops != 0)
            {
                counters.add(PortCounters.RX_DROPPED, Integer.toUnsignedLong(drops));
            }
        }
    }

    /**
     * Unmap the rings and close the sockets. Idempotent.
     */
    @Override
    public void close()
    {
        if (closed)
        {
            return;
        }
        refreshKernelStatistics();
        closed = true;
        // Stray use after close must fail in Java, not touch unmapped memory.
        rxRing.wrap(new byte[0]);
        txRing.wrap(new byte[0]);
        Libc.munmap(errnoState, MemorySegment.ofAddress(rxRingAddress), rxRingLength);
        Libc.munmap(errnoState, MemorySegment.ofAddress(txRingAddress), txRingLength);
        Libc.close(errnoState, rxFd);
        Libc.close(errnoState, txFd);
        arena.close();
    }

    @Override
    public String toString()
    {
        return "AfPacketPort{" + configuration.interfaceName() + ", ifindex=" + ifIndex + ", " + counters + '}';
    }

    /**
     * The open sequence, holding what has been acquired so far so a failure can release it.
     */
    private static final class Builder
    {
        private final AfPacketConfiguration configuration;
        private final String name;
        private final Arena arena = Arena.ofShared();
        private final MemorySegment errnoState = Libc.allocateErrnoState(arena);
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
        /** {@link #fanoutGroup} of a port in no fanout group. */
        static final int NO_FANOUT = -1;
        /** {@link #fanoutGroup} asking to create a group with a kernel-chosen unique id. */
        static final int NEW_FANOUT_GROUP = -2;
        /** The group to join (or NEW_FANOUT_GROUP, NO_FANOUT); after {@link #joinFanout}, the group joined. */
        private int fanoutGroup;

        /**
         * @param fanoutGroup the fanout group to join: a group id, {@link #NEW_FANOUT_GROUP} or {@link #NO_FANOUT}.
         *                    A member holds a drop-all socket filter from before its bind until the caller removes it.
         */
        Builder(final AfPacketConfiguration configuration, final int fanoutGroup)
        {
            this.configuration = configuration;
            this.name = configuration.interfaceName();
            this.fanoutGroup = fanoutGroup;
        }

        void openReceiveSocket()
        {
            try (Arena scratch = Arena.ofConfined())
            {
                ifIndex = Libc.ifNameToIndex(errnoState, scratch.allocateFrom(name));
                if (ifIndex == 0)
                {
                    throw new PortException("no such network interface '" + name + "'", Libc.errno(errnoState));
                }

                // Protocol 0 until the ring is ready: bind() with ETH_P_ALL then starts delivery on this interface
                // only, instead of queueing frames from every interface in the meantime.
                rxFd = newSocket();
                final InterfaceInfo info = InterfaceInfo.read(errnoState, rxFd, name, scratch);
                mtu = info.mtu();
                macAddress = info.macAddress();
                // Best effort (Linux 4.20+): the ring then never holds our own transmissions; receive() filters too.
                setIntOption(scratch, rxFd, PACKET_IGNORE_OUTGOING, 1, null);
                if (fanoutGroup != NO_FANOUT)
                {
                    final ClassicBpfProgram dropAll = ClassicBpfProgram.dropAll();
                    if (Libc.setsockopt(errnoState, rxFd, SOL_SOCKET, SO_ATTACH_FILTER, dropAll.toSockFprog(scratch),
                        ClassicBpfProgram.SOCK_FPROG_SIZE) < 0)
                    {
                        throw new PortException("setsockopt SO_ATTACH_FILTER (hold until the fanout group is " +
                            "complete) on '" + name + "'", Libc.errno(errnoState));
                    }
                }

                if (configuration.segmentationOffload())
                {
                    // Before the ring: the kernel sizes each slot's header area with the vnet header in it.
                    setIntOption(scratch, rxFd, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR (receive)");
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
                rxRingAddress = map(rxFd, rxRingLength, "RX ring");

                bind(scratch, rxFd, ETH_P_ALL);

                if (configuration.promiscuous())
                {
                    final MemorySegment membership = scratch.allocate(PACKET_MREQ_SIZE, 4);
                    membership.set(ValueLayout.JAVA_INT, PACKET_MREQ_IFINDEX_OFFSET, ifIndex);
                    membership.set(ValueLayout.JAVA_SHORT, PACKET_MREQ_TYPE_OFFSET, (short)PACKET_MR_PROMISC);
                    membership.set(ValueLayout.JAVA_SHORT, PACKET_MREQ_ALEN_OFFSET, (short)0);
                    setOption(rxFd, PACKET_ADD_MEMBERSHIP, membership, PACKET_MREQ_SIZE, "PACKET_ADD_MEMBERSHIP promiscuous");
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
                setIntOption(scratch, rxFd, PACKET_FANOUT, id | (PACKET_FANOUT_CBPF << 16) | (flags << 16),
                    "PACKET_FANOUT (CBPF" + (group < 0 ? ", new group" : ", group " + group) + ")");
                if (group >= 0)
                {
                    return;
                }
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
            setIntOption(scratch, rxFd, PACKET_VERSION, TPACKET_V2, "PACKET_VERSION TPACKET_V2");
            final int frameCount = TpacketV2RxRing.frameCount(blockSize, blockCount, rxFrameSize);
            final MemorySegment request = scratch.allocate(TPACKET_REQ_SIZE, 4);
            request.set(ValueLayout.JAVA_INT, TPACKET_REQ_BLOCK_SIZE_OFFSET, blockSize);
            request.set(ValueLayout.JAVA_INT, TPACKET_REQ_BLOCK_NR_OFFSET, blockCount);
            request.set(ValueLayout.JAVA_INT, TPACKET_REQ_FRAME_SIZE_OFFSET, rxFrameSize);
            request.set(ValueLayout.JAVA_INT, TPACKET_REQ_FRAME_NR_OFFSET, frameCount);
            setOption(rxFd, PACKET_RX_RING, request, TPACKET_REQ_SIZE,
                "PACKET_RX_RING V2 (" + frameCount + " slots of " + rxFrameSize + " bytes in " + blockCount +
                " blocks of " + blockSize + ")");
        }

        private void setUpV3ReceiveRing(final Arena scratch, final int blockSize, final int blockCount)
        {
            setIntOption(scratch, rxFd, PACKET_VERSION, TPACKET_V3, "PACKET_VERSION TPACKET_V3");
            // In V3 the frame size only sizes the kernel's bookkeeping; frames are packed by their real length.
            final int nominalFrameSize = 2048;
            final MemorySegment request = scratch.allocate(TPACKET_REQ3_SIZE, 4);
            request.set(ValueLayout.JAVA_INT, TPACKET_REQ_BLOCK_SIZE_OFFSET, blockSize);
            request.set(ValueLayout.JAVA_INT, TPACKET_REQ_BLOCK_NR_OFFSET, blockCount);
            request.set(ValueLayout.JAVA_INT, TPACKET_REQ_FRAME_SIZE_OFFSET, nominalFrameSize);
            request.set(ValueLayout.JAVA_INT, TPACKET_REQ_FRAME_NR_OFFSET, (blockSize / nominalFrameSize) * blockCount);
            request.set(ValueLayout.JAVA_INT, TPACKET_REQ3_RETIRE_BLK_TOV_OFFSET, configuration.rxBlockTimeoutMs());
            request.set(ValueLayout.JAVA_INT, TPACKET_REQ3_SIZEOF_PRIV_OFFSET, 0);
            request.set(ValueLayout.JAVA_INT, TPACKET_REQ3_FEATURE_REQ_WORD_OFFSET, 0);
            setOption(rxFd, PACKET_RX_RING, request, TPACKET_REQ3_SIZE,
                "PACKET_RX_RING V3 (" + blockCount + " blocks of " + blockSize + " bytes)");
        }

        void openTransmitSocket()
        {
            try (Arena scratch = Arena.ofConfined())
            {
                txFd = newSocket();
                setIntOption(scratch, txFd, PACKET_VERSION, TPACKET_V2, "PACKET_VERSION TPACKET_V2");
                setIntOption(scratch, txFd, PACKET_LOSS, 1, "PACKET_LOSS");
                if (configuration.qdiscBypass())
                {
                    setIntOption(scratch, txFd, PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS");
                }

                if (configuration.segmentationOffload())
                {
                    setIntOption(scratch, txFd, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR (transmit)");
                }
                final int frameSize = configuration.txFrameSize();
                final int pageSize = Libc.pageSize();
                // Slots never straddle blocks: use the smallest block holding whole slots and whole pages, unless
                // that gets large, then one page-rounded slot per block.
                long blockSize = lcm(frameSize, pageSize);
                if (blockSize > (1 << 22))
                {
                    blockSize = ((long)frameSize + pageSize - 1) / pageSize * pageSize;
                }
                final int framesPerBlock = (int)(blockSize / frameSize);
                final int blockCount = (configuration.txFrameCount() + framesPerBlock - 1) / framesPerBlock;
                final int frameCount = blockCount * framesPerBlock;

                final MemorySegment request = scratch.allocate(TPACKET_REQ_SIZE, 4);
                request.set(ValueLayout.JAVA_INT, TPACKET_REQ_BLOCK_SIZE_OFFSET, (int)blockSize);
                request.set(ValueLayout.JAVA_INT, TPACKET_REQ_BLOCK_NR_OFFSET, blockCount);
                request.set(ValueLayout.JAVA_INT, TPACKET_REQ_FRAME_SIZE_OFFSET, frameSize);
                request.set(ValueLayout.JAVA_INT, TPACKET_REQ_FRAME_NR_OFFSET, frameCount);
                setOption(txFd, PACKET_TX_RING, request, TPACKET_REQ_SIZE,
                    "PACKET_TX_RING (" + frameCount + " slots of " + frameSize + " bytes)");

                txRingLength = blockSize * blockCount;
                txRingAddress = map(txFd, txRingLength, "TX ring");
                txSlotOffsets = new int[frameCount];
                for (int i = 0; i < frameCount; i++)
                {
                    txSlotOffsets[i] = (int)((i / framesPerBlock) * blockSize + (long)(i % framesPerBlock) * frameSize);
                }

                // Protocol 0: this socket only sends; the kernel derives each frame's protocol from its header.
                bind(scratch, txFd, 0);
            }
        }

        private int newSocket()
        {
            final int fd = Libc.socket(errnoState, AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
            if (fd < 0)
            {
                throw new PortException(
                    "socket(AF_PACKET, SOCK_RAW) for '" + name + "' (needs CAP_NET_RAW)", Libc.errno(errnoState));
            }
            return fd;
        }

        private void bind(final Arena scratch, final int fd, final int protocol)
        {
            final MemorySegment address = scratch.allocate(SOCKADDR_LL_SIZE, 4);
            address.set(ValueLayout.JAVA_SHORT, SOCKADDR_LL_FAMILY_OFFSET, (short)AF_PACKET);
            address.set(ValueLayout.JAVA_SHORT, SOCKADDR_LL_PROTOCOL_OFFSET, (short)htons(protocol));
            address.set(ValueLayout.JAVA_INT, SOCKADDR_LL_IFINDEX_OFFSET, ifIndex);
            if (Libc.bind(errnoState, fd, address, SOCKADDR_LL_SIZE) < 0)
            {
                throw new PortException("bind AF_PACKET socket to '" + name + "'", Libc.errno(errnoState));
            }
        }

        private long map(final int fd, final long length, final String what)
        {
            final MemorySegment mapped = Libc.mmap(errnoState, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
            if (mapped.address() == MAP_FAILED)
            {
                throw new PortException("mmap " + what + " of " + length + " bytes for '" + name + "'",
                    Libc.errno(errnoState));
            }
            return mapped.address();
        }

        /**
         * @param failure what to name in the exception, or null for an option that may be missing.
         */
        private void setIntOption(final Arena scratch, final int fd, final int option, final int value, final String failure)
        {
            final MemorySegment segment = scratch.allocate(ValueLayout.JAVA_INT);
            segment.set(ValueLayout.JAVA_INT, 0, value);
            if (Libc.setsockopt(errnoState, fd, SOL_PACKET, option, segment, Integer.BYTES) < 0 && null != failure)
            {
                throw new PortException("setsockopt " + failure + " on '" + name + "'", Libc.errno(errnoState));
            }
        }

        private void setOption(
            final int fd, final int option, final MemorySegment value, final int length, final String failure)
        {
            if (Libc.setsockopt(errnoState, fd, SOL_PACKET, option, value, length) < 0)
            {
                throw new PortException("setsockopt " + failure + " on '" + name + "'", Libc.errno(errnoState));
            }
        }

        void release()
        {
            if (rxRingAddress != 0)
            {
                Libc.munmap(errnoState, MemorySegment.ofAddress(rxRingAddress), rxRingLength);
            }
            if (txRingAddress != 0)
            {
                Libc.munmap(errnoState, MemorySegment.ofAddress(txRingAddress), txRingLength);
            }
            if (rxFd >= 0)
            {
                Libc.close(errnoState, rxFd);
            }
            if (txFd >= 0)
            {
                Libc.close(errnoState, txFd);
            }
            arena.close();
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
}
