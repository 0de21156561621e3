package io.netreduce.protocol.port;

import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.locks.LockSupport;

import static io.netreduce.protocol.port.LinuxPacketAbi.*;
import static io.netreduce.protocol.port.XdpAbi.*;

/**
 * A {@link PacketPort} over an AF_XDP socket bound to one queue of one interface, with the project's own XDP
 * program ({@link XdpRedirectProgram}) attached through a BPF link, all set up with raw system calls through the
 * FFM API (no libbpf, no libxdp, no JNI).
 * <p>
 * Memory: one UMEM, an anonymous mapping registered with the socket and cut into chunks of
 * {@link AfXdpConfiguration#chunkSize()} bytes. The first {@code rxRingSize} chunks receive: all start on the
 * fill ring, the kernel writes frames into them and posts descriptors on the RX ring, and {@link #receive} hands
 * each frame to the handler straight from the UMEM and puts its chunk back on the fill ring. The rest of the UMEM
 * is {@code txFrameCount} transmit slots of as many consecutive chunks as an MTU-sized frame needs, claimed in ring
 * order: {@link #tryClaim} points into the next free slot, {@link #commit} writes its descriptors (one per chunk,
 * XDP_PKT_CONTD on all but the last) to the TX ring, {@link #flush} publishes them and kicks the kernel when it
 * asks for it (XDP_USE_NEED_WAKEUP), and a slot is free again once the completion ring has returned all its chunks.
 * <p>
 * Frames longer than a chunk (jumbo MTUs: a chunk is at most a page) travel as multi-buffer frames (XDP_USE_SG,
 * the program loaded with BPF_F_XDP_HAS_FRAGS). On receive such a frame's pieces are not contiguous (each chunk
 * keeps its headroom), so it is copied into a preallocated scratch buffer and handed over from there.
 * <p>
 * Nothing outlives the port: the program is attached by a BPF link (detached when the link's descriptor closes, so
 * also when the process dies), the map and socket go with their descriptors, promiscuous mode with the packet
 * socket that asked for it. The socket belongs to the network namespace of the thread that calls {@link #open}
 * (see {@link NetworkNamespace}). {@link #receive}, {@link #send}, {@link #tryClaim}, {@link #commit} and
 * {@link #flush} do not allocate.
 */
public final class AfXdpPort implements PollablePort
{
    /** {@link #receive} reads the socket's drop statistics once per this many calls. */
    private static final int STATISTICS_INTERVAL_CALLS = 4096;
    private static final short POLLIN = 0x1;
    private static final int POLLFD_SIZE = 8;
    private static final int MAP_PRIVATE = 0x02;
    private static final int MAP_ANONYMOUS = 0x20;
    private static final int EBUSY = 16;
    /** How long {@link #open} waits for a queue that a just-closed socket still holds. */
    private static final long QUEUE_RELEASE_WAIT_NS = 2_000_000_000L;
    /** getsockopt XDP_OPTIONS: struct xdp_options { __u32 flags; } with XDP_OPTIONS_ZEROCOPY. */
    private static final int XDP_OPTIONS = 8;
    private static final int XDP_OPTIONS_ZEROCOPY = 1;

    private final AfXdpConfiguration configuration;
    private final int ifIndex;
    private final int mtu;
    private final byte[] macAddress;
    private final boolean zeroCopy;
    private final boolean nativeXdp;
    private final PortCounters counters = new PortCounters();
    private final Arena arena;
    private final MemorySegment errnoState;
    private final MemorySegment statistics;
    private final MemorySegment statisticsLength;
    private final MemorySegment pollFd;
    private final long[] lastStatistics = new long[STATISTICS_SIZE / Long.BYTES];

    private final int xskFd;
    private final int mapFd;
    private final int programFd;
    private final int linkFd;
    private final int promiscuousFd;

    private final long umemAddress;
    private final long umemLength;
    private final UnsafeBuffer umem;
    private final int chunkSize;
    private final long chunkMask;

    private final XdpRing rx;
    private final XdpRing fill;
    private final XdpRing tx;
    private final XdpRing completion;

    /** Multi-buffer frames are reassembled here; its capacity is the longest frame accepted. */
    private final UnsafeBuffer scratch;
    private int scratchLength;
    private boolean assembling;
    private boolean discarding;

    private final int txSlotBase;
    private final int txSlotSize;
    private final int txSlotCount;
    private final int[] txSlotDescriptors;
    private final int[] txSlotLengths;
    /** TX ring index just past each slot's last descriptor: the slot's frame is taken once the consumer passes it. */
    private final int[] txSlotEnds;
    private final int maxTxFrameLength;

    private int rxConsumer;
    private int fillProducer;
    private int txProducer;
    private int completionConsumer;
    private int receiveCalls;

    private int txHead;
    /** Oldest slot not yet completed, and how many of its descriptors the completion ring has returned. */
    private int txTail;
    private int txTailCompleted;
    private int txSlotsInUse;
    /** Oldest committed slot whose frame the kernel has not taken yet, and how many such frames there are. */
    private int txUntakenStart;
    private int txUntaken;
    private int claimLength;

    private boolean closed;

    private AfXdpPort(final Builder b)
    {
        configuration = b.configuration;
        ifIndex = b.ifIndex;
        mtu = b.mtu;
        macAddress = b.macAddress;
        zeroCopy = b.zeroCopy;
        nativeXdp = b.nativeXdp;
        arena = b.arena;
        errnoState = b.errnoState;
        statistics = arena.allocate(STATISTICS_SIZE, 8);
        statisticsLength = arena.allocate(ValueLayout.JAVA_INT);
        pollFd = arena.allocate(POLLFD_SIZE, 8);
        xskFd = b.xskFd;
        mapFd = b.mapFd;
        programFd = b.programFd;
        linkFd = b.linkFd;
        promiscuousFd = b.promiscuousFd;
        umemAddress = b.umemAddress;
        umemLength = b.umemLength;
        umem = new UnsafeBuffer(umemAddress, (int)umemLength);
        chunkSize = configuration.chunkSize();
        chunkMask = ~((long)chunkSize - 1);
        rx = b.rx;
        fill = b.fill;
        tx = b.tx;
        completion = b.completion;
        fillProducer = b.fillProducer;
        scratch = new UnsafeBuffer(arena.allocate(b.maxFrameLength, 64).address(), b.maxFrameLength);
        txSlotBase = b.txSlotBase;
        txSlotSize = b.txSlotChunks * chunkSize;
        txSlotCount = configuration.txFrameCount();
        txSlotDescriptors = new int[txSlotCount];
        txSlotLengths = new int[txSlotCount];
        txSlotEnds = new int[txSlotCount];
        maxTxFrameLength = b.maxFrameLength;

        pollFd.set(ValueLayout.JAVA_INT, 0, xskFd);
        pollFd.set(ValueLayout.JAVA_SHORT, 4, POLLIN);
    }

    /**
     * Open a port on {@code configuration.interfaceName()} in the calling thread's network namespace.
     *
     * @throws PortException naming the failed step and its errno text: no such interface, no CAP_NET_RAW,
     *                       CAP_BPF or CAP_NET_ADMIN (EPERM), a UMEM or ring the kernel refuses, zero-copy asked
     *                       of a driver without it, the program refused (with the verifier's log), another XDP
     *                       program already attached.
     */
    public static AfXdpPort open(final AfXdpConfiguration configuration)
    {
        final Builder builder = new Builder(configuration);
        try
        {
            builder.openSocket();
            builder.attachProgram();
            return new AfXdpPort(builder);
        }
        catch (final RuntimeException | Error ex)
        {
            builder.release();
            throw ex;
        }
    }

    /**
     * Open a port with {@link AfXdpConfiguration#defaults(String) default} settings.
     */
    public static AfXdpPort open(final String interfaceName)
    {
        return open(AfXdpConfiguration.defaults(interfaceName));
    }

    @Override
    public String name()
    {
        return configuration.interfaceName();
    }

    public AfXdpConfiguration configuration()
    {
        return configuration;
    }

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
     * @return whether the socket is bound zero-copy (else the kernel copies frames to and from the UMEM).
     */
    public boolean zeroCopy()
    {
        return zeroCopy;
    }

    /**
     * @return whether the program sits on the driver's native XDP hook (else the generic one).
     */
    public boolean nativeXdp()
    {
        return nativeXdp;
    }

    /**
     * @return how the port is bound, e.g. {@code copy/native} or {@code zero-copy/native}.
     */
    public String mode()
    {
        return (zeroCopy ? "zero-copy" : "copy") + "/" + (nativeXdp ? "native" : "generic");
    }

    /**
     * @return the longest frame {@link #send} accepts and {@link #receive} delivers: MTU + Ethernet header + one
     *         VLAN tag.
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

        int consumer = rxConsumer;
        final int available = rx.producer() - consumer;
        if (available == 0)
        {
            if (fill.needsWakeup())
            {
                // Zero-copy drivers stop receiving when they found the fill ring empty until woken by a system
                // call (copy mode never sets this flag on the fill ring).
                Libc.recvKick(errnoState, xskFd, MSG_DONTWAIT);
            }
            return 0;
        }
        final int end = consumer + available;
        final UnsafeBuffer rxMemory = rx.memory();
        final UnsafeBuffer fillMemory = fill.memory();
        final UnsafeBuffer umem = this.umem;
        int fillIndex = fillProducer;
        int frames = 0;
        while (consumer != end && frames < limit)
        {
            final int entry = rx.entryOffset(consumer);
            final long address = rxMemory.getLong(entry + DESC_ADDR_OFFSET);
            final int length = rxMemory.getInt(entry + DESC_LEN_OFFSET);
            final boolean more = (rxMemory.getInt(entry + DESC_OPTIONS_OFFSET) & XDP_PKT_CONTD) != 0;
            consumer++;

            if (!assembling && !more)
            {
                counters.onFrameReceived(length);
                handler.onFrame(umem, (int)address, length, 0);
                frames++;
            }
            else
            {
                frames += assemble(handler, umem, (int)address, length, more);
            }
            // The chunk goes back to the kernel only when the fill producer is published, after the handler ran.
            fillMemory.putLong(fill.entryOffset(fillIndex++), address & chunkMask);
        }
        rxConsumer = consumer;
        rx.publishConsumer(consumer);
        fillProducer = fillIndex;
        fill.publishProducer(fillIndex);
        if (fill.needsWakeup())
        {
            Libc.recvKick(errnoState, xskFd, MSG_DONTWAIT);
        }
        return frames;
    }

    /**
     * One piece of a multi-buffer frame into the scratch buffer; hands the frame over after its last piece.
     *
     * @return 1 if a frame was delivered, else 0.
     */
    private int assemble(
        final FrameHandler handler, final UnsafeBuffer umem, final int address, final int length, final boolean more)
    {
        if (!assembling)
        {
            assembling = true;
            discarding = false;
            scratchLength = 0;
        }
        if (!discarding)
        {
            if (scratchLength + length > scratch.capacity())
            {
                discarding = true;
            }
            else
            {
                scratch.putBytes(scratchLength, umem, address, length);
                scratchLength += length;
            }
        }
        if (more)
        {
            return 0;
        }
        assembling = false;
        if (discarding)
        {
            counters.add(PortCounters.RX_TRUNCATED, 1);
            return 0;
        }
        counters.onFrameReceived(scratchLength);
        handler.onFrame(scratch, 0, scratchLength, 0);
        return 1;
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
        if (txSlotsInUse == txSlotCount)
        {
            reapCompletions();
            if (txSlotsInUse == txSlotCount)
            {
                counters.add(PortCounters.TX_RING_FULL, 1);
                return -1;
            }
        }
        claimLength = length;
        return txSlotBase + txHead * txSlotSize;
    }

    @Override
    public MutableDirectBuffer claimBuffer()
    {
        return umem;
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
        final UnsafeBuffer txMemory = tx.memory();
        long address = txSlotBase + (long)slot * txSlotSize;
        int remaining = length;
        int descriptors = 0;
        int index = txProducer;
        while (remaining > 0)
        {
            final int piece = Math.min(remaining, chunkSize);
            remaining -= piece;
            final int entry = tx.entryOffset(index++);
            txMemory.putLong(entry + DESC_ADDR_OFFSET, address);
            txMemory.putInt(entry + DESC_LEN_OFFSET, piece);
            txMemory.putInt(entry + DESC_OPTIONS_OFFSET, remaining > 0 ? XDP_PKT_CONTD : 0);
            address += piece;
            descriptors++;
        }
        txProducer = index;
        txSlotDescriptors[slot] = descriptors;
        txSlotLengths[slot] = length;
        txSlotEnds[slot] = index;
        txHead = slot + 1 == txSlotCount ? 0 : slot + 1;
        txSlotsInUse++;
        txUntaken++;
    }

    /**
     * Publish the queued descriptors, kick the kernel if it asks to be (in copy mode it always does, and takes at
     * most a budget of frames per call, so the kick repeats while it makes progress), count the frames it took and
     * reap the completion ring. Frames it could not take yet stay queued and go with a later flush.
     *
     * @return frames handed to the kernel by this call.
     */
    @Override
    public int flush()
    {
        if (closed || txUntaken == 0)
        {
            return 0;
        }
        final int producer = txProducer;
        tx.publishProducer(producer);
        int consumer = tx.consumer();
        while (consumer != producer && tx.needsWakeup())
        {
            final long sent = Libc.sendKick(errnoState, xskFd, MSG_DONTWAIT);
            final int before = consumer;
            consumer = tx.consumer();
            if (sent < 0)
            {
                final int errno = Libc.errno(errnoState);
                if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR && errno != EBUSY)
                {
                    counters.add(PortCounters.TX_ERRORS, 1);
                    break;
                }
            }
            reapCompletions();
            if (consumer == before)
            {
                break;
            }
        }

        int taken = 0;
        while (txUntaken > 0)
        {
            final int slot = txUntakenStart;
            if (consumer - txSlotEnds[slot] < 0)
            {
                break;
            }
            counters.onFrameTransmitted(txSlotLengths[slot]);
            taken++;
            txUntaken--;
            txUntakenStart = slot + 1 == txSlotCount ? 0 : slot + 1;
        }
        reapCompletions();
        return taken;
    }

    /**
     * Return the slots whose chunks the completion ring has given back. Slots complete in the order they were
     * sent: the kernel completes one queue's descriptors in order.
     */
    private void reapCompletions()
    {
        final int produced = completion.producer();
        int returned = produced - completionConsumer;
        if (returned == 0)
        {
            return;
        }
        completionConsumer = produced;
        completion.publishConsumer(produced);
        returned += txTailCompleted;
        while (txSlotsInUse > 0)
        {
            final int descriptors = txSlotDescriptors[txTail];
            if (returned < descriptors)
            {
                break;
            }
            returned -= descriptors;
            txTail = txTail + 1 == txSlotCount ? 0 : txTail + 1;
            txSlotsInUse--;
        }
        txTailCompleted = returned;
    }

    /** The socket, for {@link PortPoller}: it polls readable while the RX ring holds descriptors. */
    @Override
    public int receiveFd()
    {
        return xskFd;
    }

    @Override
    public boolean hasReceiveWork()
    {
        return !closed && rx.producer() != rxConsumer;
    }

    @Override
    public boolean hasPendingTransmit()
    {
        return txUntaken > 0;
    }

    /**
     * Wait, without spinning, until a frame is ready or {@code timeoutMs} passes.
     *
     * @return true if {@link #receive} may have frames to deliver.
     */
    public boolean awaitReceive(final int timeoutMs)
    {
        if (closed)
        {
            return false;
        }
        if (hasReceiveWork())
        {
            return true;
        }
        return Libc.poll(errnoState, pollFd, 1, timeoutMs) > 0;
    }

    /**
     * Fold the socket's drop counts (XDP_STATISTICS, cumulative) into the port counters: {@code rx_dropped} gains
     * the frames the socket dropped (no fill chunk, oversize without multi-buffer) and those the full RX ring
     * refused; {@code tx_errors} gains invalid TX descriptors. {@link #receive} does this every few thousand
     * calls; call it directly before reading counters for a report. Owning thread only.
     */
    public void refreshKernelStatistics()
    {
        if (closed)
        {
            return;
        }
        statisticsLength.set(ValueLayout.JAVA_INT, 0, STATISTICS_SIZE);
        if (Libc.getsockopt(errnoState, xskFd, SOL_XDP, XDP_STATISTICS, statistics, statisticsLength) == 0)
        {
            final long dropped = delta(STATISTICS_RX_DROPPED_OFFSET) + delta(STATISTICS_RX_RING_FULL_OFFSET);
            if (dropped != 0)
            {
                counters.add(PortCounters.RX_DROPPED, dropped);
            }
            final long invalid = delta(STATISTICS_TX_INVALID_DESCS_OFFSET);
            if (invalid != 0)
            {
                counters.add(PortCounters.TX_ERRORS, invalid);
            }
        }
    }

    /**
     * @return the socket's XDP_STATISTICS as last read by {@link #refreshKernelStatistics}: rx_dropped,
     *         rx_invalid_descs, tx_invalid_descs, rx_ring_full, rx_fill_ring_empty_descs, tx_ring_empty_descs.
     */
    public long[] kernelStatistics()
    {
        return lastStatistics.clone();
    }

    private long delta(final int offset)
    {
        final long value = statistics.get(ValueLayout.JAVA_LONG, offset);
        final int index = offset / Long.BYTES;
        final long delta = value - lastStatistics[index];
        lastStatistics[index] = value;
        return delta;
    }

    /**
     * Detach the program, close the socket and map, unmap the rings and UMEM. Idempotent.
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
        umem.wrap(new byte[0]);
        scratch.wrap(new byte[0]);
        for (final XdpRing ring : new XdpRing[] {rx, fill, tx, completion})
        {
            ring.detach();
            Libc.munmap(errnoState, MemorySegment.ofAddress(ring.mapAddress()), ring.mapLength());
        }
        // The link first: the program stops redirecting to the socket before the socket goes.
        Libc.close(errnoState, linkFd);
        Libc.close(errnoState, programFd);
        Libc.close(errnoState, mapFd);
        Libc.close(errnoState, xskFd);
        if (promiscuousFd >= 0)
        {
            Libc.close(errnoState, promiscuousFd);
        }
        Libc.munmap(errnoState, MemorySegment.ofAddress(umemAddress), umemLength);
        arena.close();
    }

    @Override
    public String toString()
    {
        return "AfXdpPort{" + configuration.interfaceName() + ", ifindex=" + ifIndex + ", queue=" +
            configuration.queueId() + ", " + mode() + ", " + counters + '}';
    }

    /**
     * The open sequence, holding what has been acquired so far so a failure can release it.
     */
    private static final class Builder
    {
        private final AfXdpConfiguration configuration;
        private final String name;
        private final Arena arena = Arena.ofShared();
        private final MemorySegment errnoState = Libc.allocateErrnoState(arena);
        private int ifIndex;
        private int mtu;
        private byte[] macAddress;
        private int maxFrameLength;
        private boolean zeroCopy;
        private boolean nativeXdp;
        private int xskFd = -1;
        private int mapFd = -1;
        private int programFd = -1;
        private int linkFd = -1;
        private int promiscuousFd = -1;
        private long umemAddress;
        private long umemLength;
        private int txSlotBase;
        private int txSlotChunks;
        private XdpRing rx;
        private XdpRing fill;
        private XdpRing tx;
        private XdpRing completion;
        private int fillProducer;

        Builder(final AfXdpConfiguration configuration)
        {
            this.configuration = configuration;
            this.name = configuration.interfaceName();
        }

        void openSocket()
        {
            try (Arena scratch = Arena.ofConfined())
            {
                ifIndex = Libc.ifNameToIndex(errnoState, scratch.allocateFrom(name));
                if (ifIndex == 0)
                {
                    throw new PortException("no such network interface '" + name + "'", Libc.errno(errnoState));
                }
                xskFd = Libc.socket(errnoState, AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
                if (xskFd < 0)
                {
                    throw new PortException(
                        "socket(AF_XDP, SOCK_RAW) for '" + name + "' (needs CAP_NET_RAW)", Libc.errno(errnoState));
                }
                // A packet socket of protocol 0 receives nothing; it serves the interface ioctls (an AF_XDP socket
                // has none) and, kept open, holds the promiscuous membership.
                promiscuousFd = Libc.socket(errnoState, AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
                if (promiscuousFd < 0)
                {
                    throw new PortException(
                        "socket(AF_PACKET) for '" + name + "' (needs CAP_NET_RAW)", Libc.errno(errnoState));
                }
                final InterfaceInfo info = InterfaceInfo.read(errnoState, promiscuousFd, name, scratch);
                mtu = info.mtu();
                macAddress = info.macAddress();
                if (configuration.promiscuous())
                {
                    enterPromiscuousMode(scratch);
                }
                else
                {
                    Libc.close(errnoState, promiscuousFd);
                    promiscuousFd = -1;
                }

                final int chunkSize = configuration.chunkSize();
                if (chunkSize > Libc.pageSize())
                {
                    throw new PortException("UMEM chunk of " + chunkSize + " bytes exceeds the page size " +
                        Libc.pageSize() + " on '" + name + "'");
                }
                maxFrameLength = mtu + ETH_HLEN + VLAN_HLEN;
                txSlotChunks = (maxFrameLength + chunkSize - 1) / chunkSize;
                final int rxChunks = configuration.rxRingSize();
                final int txChunks = configuration.txFrameCount() * txSlotChunks;
                umemLength = (long)(rxChunks + txChunks) * chunkSize;
                if (umemLength > Integer.MAX_VALUE)
                {
                    throw new PortException("UMEM of " + umemLength + " bytes too large for '" + name + "'");
                }
                txSlotBase = rxChunks * chunkSize;
                final MemorySegment mapped = Libc.mmap(
                    errnoState, umemLength, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
                if (mapped.address() == MAP_FAILED)
                {
                    throw new PortException("mmap UMEM of " + umemLength + " bytes for '" + name + "'",
                        Libc.errno(errnoState));
                }
                umemAddress = mapped.address();

                final MemorySegment registration = scratch.allocate(UMEM_REG_SIZE, 8);
                registration.set(ValueLayout.JAVA_LONG, UMEM_REG_ADDR_OFFSET, umemAddress);
                registration.set(ValueLayout.JAVA_LONG, UMEM_REG_LEN_OFFSET, umemLength);
                registration.set(ValueLayout.JAVA_INT, UMEM_REG_CHUNK_SIZE_OFFSET, chunkSize);
                registration.set(ValueLayout.JAVA_INT, UMEM_REG_HEADROOM_OFFSET, 0);
                registration.set(ValueLayout.JAVA_INT, UMEM_REG_FLAGS_OFFSET, 0);
                registration.set(ValueLayout.JAVA_INT, UMEM_REG_TX_METADATA_LEN_OFFSET, 0);
                setOption(XDP_UMEM_REG, registration, UMEM_REG_SIZE,
                    "XDP_UMEM_REG (" + (rxChunks + txChunks) + " chunks of " + chunkSize + " bytes)");

                // Rings of a power of two at least as large as what can be outstanding: none can overflow.
                final int txRingSize = Integer.highestOneBit(Math.max(1, txChunks * 2 - 1));
                setIntOption(scratch, XDP_UMEM_FILL_RING, rxChunks, "XDP_UMEM_FILL_RING");
                setIntOption(scratch, XDP_UMEM_COMPLETION_RING, txRingSize, "XDP_UMEM_COMPLETION_RING");
                setIntOption(scratch, XDP_RX_RING, rxChunks, "XDP_RX_RING");
                setIntOption(scratch, XDP_TX_RING, txRingSize, "XDP_TX_RING");

                final MemorySegment offsets = scratch.allocate(MMAP_OFFSETS_SIZE, 8);
                final MemorySegment offsetsLength = scratch.allocate(ValueLayout.JAVA_INT);
                offsetsLength.set(ValueLayout.JAVA_INT, 0, MMAP_OFFSETS_SIZE);
                if (Libc.getsockopt(errnoState, xskFd, SOL_XDP, XDP_MMAP_OFFSETS, offsets, offsetsLength) < 0)
                {
                    throw new PortException("getsockopt XDP_MMAP_OFFSETS on '" + name + "'", Libc.errno(errnoState));
                }
                rx = mapRing(offsets, MMAP_OFFSETS_RX, XDP_PGOFF_RX_RING, rxChunks, DESC_SIZE, "RX ring");
                tx = mapRing(offsets, MMAP_OFFSETS_TX, XDP_PGOFF_TX_RING, txRingSize, DESC_SIZE, "TX ring");
                fill = mapRing(offsets, MMAP_OFFSETS_FILL, XDP_UMEM_PGOFF_FILL_RING, rxChunks,
                    ADDRESS_ENTRY_SIZE, "fill ring");
                completion = mapRing(offsets, MMAP_OFFSETS_COMPLETION, XDP_UMEM_PGOFF_COMPLETION_RING, txRingSize,
                    ADDRESS_ENTRY_SIZE, "completion ring");

                // Every receive chunk starts with the kernel.
                for (int i = 0; i < rxChunks; i++)
                {
                    fill.memory().putLong(fill.entryOffset(i), (long)i * chunkSize);
                }
                fillProducer = rxChunks;
                fill.publishProducer(fillProducer);

                bind(scratch);
            }
        }

        /**
         * AUTO binds with neither XDP_COPY nor XDP_ZEROCOPY, which makes the kernel try zero-copy and fall back to
         * copy by itself; XDP_OPTIONS then says which it chose.
         */
        private void bind(final Arena scratch)
        {
            final int modeFlag = switch (configuration.bindMode())
            {
                case AUTO -> 0;
                case COPY -> XDP_COPY;
                case ZERO_COPY -> XDP_ZEROCOPY;
            };
            final MemorySegment address = scratch.allocate(SOCKADDR_XDP_SIZE, 4);
            address.set(ValueLayout.JAVA_SHORT, SOCKADDR_XDP_FAMILY_OFFSET, (short)AF_XDP);
            address.set(ValueLayout.JAVA_SHORT, SOCKADDR_XDP_FLAGS_OFFSET,
                (short)(modeFlag | XDP_USE_NEED_WAKEUP | XDP_USE_SG));
            address.set(ValueLayout.JAVA_INT, SOCKADDR_XDP_IFINDEX_OFFSET, ifIndex);
            address.set(ValueLayout.JAVA_INT, SOCKADDR_XDP_QUEUE_ID_OFFSET, configuration.queueId());
            // A socket closed a moment ago (a port closed and reopened, a daemon restarted) frees its queue only
            // when the kernel's deferred release has run: EBUSY until then, so retry for a while.
            final long deadline = System.nanoTime() + QUEUE_RELEASE_WAIT_NS;
            int result;
            while ((result = Libc.bind(errnoState, xskFd, address, SOCKADDR_XDP_SIZE)) < 0 &&
                Libc.errno(errnoState) == EBUSY && System.nanoTime() < deadline)
            {
                LockSupport.parkNanos(5_000_000L);
            }
            if (result < 0)
            {
                throw new PortException("bind AF_XDP socket to '" + name + "' queue " + configuration.queueId() +
                    " (" + configuration.bindMode().name().toLowerCase().replace('_', '-') + ", multi-buffer" +
                    (Libc.errno(errnoState) == EBUSY ? "; another AF_XDP socket holds the queue" : "") + ")",
                    Libc.errno(errnoState));
            }
            final MemorySegment options = scratch.allocate(ValueLayout.JAVA_INT);
            final MemorySegment optionsLength = scratch.allocate(ValueLayout.JAVA_INT);
            optionsLength.set(ValueLayout.JAVA_INT, 0, Integer.BYTES);
            zeroCopy = Libc.getsockopt(errnoState, xskFd, SOL_XDP, XDP_OPTIONS, options, optionsLength) == 0 &&
                (options.get(ValueLayout.JAVA_INT, 0) & XDP_OPTIONS_ZEROCOPY) != 0;
        }

        void attachProgram()
        {
            mapFd = Bpf.createXskMap(errnoState, configuration.queueId() + 1, name);
            Bpf.putSocket(errnoState, mapFd, configuration.queueId(), xskFd);
            programFd = Bpf.loadRedirectProgram(errnoState, mapFd, name);

            final XdpAttachMode mode = configuration.attachMode();
            int result = -1;
            if (mode != XdpAttachMode.GENERIC)
            {
                result = Bpf.tryLinkXdp(errnoState, programFd, ifIndex, XDP_FLAGS_DRV_MODE);
                nativeXdp = result >= 0;
            }
            if (result < 0 && mode != XdpAttachMode.NATIVE && result != -EBUSY)
            {
                result = Bpf.tryLinkXdp(errnoState, programFd, ifIndex, XDP_FLAGS_SKB_MODE);
            }
            if (result < 0)
            {
                throw new PortException("BPF_LINK_CREATE attaching the XDP program to '" + name + "' (" +
                    mode.name().toLowerCase() + " mode" +
                    (result == -EBUSY ? "; another XDP program is attached to the interface" : "") + ")", -result);
            }
            linkFd = result;
        }

        private XdpRing mapRing(
            final MemorySegment offsets, final int which, final long pageOffset, final int size, final int entrySize,
            final String what)
        {
            final long producer = offsets.get(ValueLayout.JAVA_LONG, which + RING_OFFSET_PRODUCER);
            final long consumer = offsets.get(ValueLayout.JAVA_LONG, which + RING_OFFSET_CONSUMER);
            final long desc = offsets.get(ValueLayout.JAVA_LONG, which + RING_OFFSET_DESC);
            final long flags = offsets.get(ValueLayout.JAVA_LONG, which + RING_OFFSET_FLAGS);
            final long length = desc + (long)size * entrySize;
            final MemorySegment mapped = Libc.mmap(errnoState, length, PROT_READ | PROT_WRITE, MAP_SHARED | 0x8000,
                xskFd, pageOffset);
            if (mapped.address() == MAP_FAILED)
            {
                throw new PortException("mmap " + what + " of " + length + " bytes for '" + name + "'",
                    Libc.errno(errnoState));
            }
            final XdpRing ring = new XdpRing(
                mapped.address(), length, (int)producer, (int)consumer, (int)flags, (int)desc, size, entrySize);
            mappedRings[mappedRingCount++] = ring;
            return ring;
        }

        private final XdpRing[] mappedRings = new XdpRing[4];
        private int mappedRingCount;

        /**
         * A packet socket of protocol 0 receives nothing, but its PACKET_MR_PROMISC membership keeps the interface
         * promiscuous exactly as long as the socket is open.
         */
        private void enterPromiscuousMode(final Arena scratch)
        {
            final MemorySegment membership = scratch.allocate(PACKET_MREQ_SIZE, 4);
            membership.set(ValueLayout.JAVA_INT, PACKET_MREQ_IFINDEX_OFFSET, ifIndex);
            membership.set(ValueLayout.JAVA_SHORT, PACKET_MREQ_TYPE_OFFSET, (short)PACKET_MR_PROMISC);
            if (Libc.setsockopt(errnoState, promiscuousFd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, membership,
                PACKET_MREQ_SIZE) < 0)
            {
                throw new PortException("setsockopt PACKET_ADD_MEMBERSHIP promiscuous on '" + name + "'",
                    Libc.errno(errnoState));
            }
        }

        private void setIntOption(final Arena scratch, final int option, final int value, final String what)
        {
            final MemorySegment segment = scratch.allocate(ValueLayout.JAVA_INT);
            segment.set(ValueLayout.JAVA_INT, 0, value);
            setOption(option, segment, Integer.BYTES, what + " of " + value);
        }

        private void setOption(final int option, final MemorySegment value, final int length, final String what)
        {
            if (Libc.setsockopt(errnoState, xskFd, SOL_XDP, option, value, length) < 0)
            {
                throw new PortException("setsockopt " + what + " on '" + name + "'", Libc.errno(errnoState));
            }
        }

        void release()
        {
            for (int i = 0; i < mappedRingCount; i++)
            {
                Libc.munmap(errnoState, MemorySegment.ofAddress(mappedRings[i].mapAddress()), mappedRings[i].mapLength());
            }
            for (final int fd : new int[] {linkFd, programFd, mapFd, xskFd, promiscuousFd})
            {
                if (fd >= 0)
                {
                    Libc.close(errnoState, fd);
                }
            }
            if (umemAddress != 0)
            {
                Libc.munmap(errnoState, MemorySegment.ofAddress(umemAddress), umemLength);
            }
            arena.close();
        }
    }
}
