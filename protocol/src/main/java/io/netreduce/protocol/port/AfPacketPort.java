package io.netreduce.protocol.port;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
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
    /**
     * {@link #receive} reads the kernel's drop statistics once per this many calls: often enough that the branch
     * is taken while the JIT profiles the receive path (its profiling tier runs for a few thousand calls), which at
     * 4,096 it was not, so C2 compiled the read as a trap and the first read threw a sidecar agent's whole duty cycle
     * back to the interpreter at the end of its warm-up, to be compiled again in its first call (an agent's compile
     * log, 2026-11-27). One getsockopt per 256 calls is a few hundred a second at most.
     */
    private static final int STATISTICS_INTERVAL_CALLS = 256;
    /**
     * Calls before the first read: early, so that even a short-lived port (a warm-up's) takes that branch and the JIT
     * compiles it, where a branch never taken is compiled as a trap that throws the receive path back to the
     * interpreter when a long-lived port first takes it (seen in a sidecar agent's first session).
     */
    private static final int FIRST_STATISTICS_CALLS = 16;
    /** The kernel's limit on sockets in one fanout group (PACKET_FANOUT_MAX). */
    public static final int MAX_FANOUT_MEMBERS = 256;

    private final AfPacketConfiguration configuration;
    private final int ifIndex;
    private final int mtu;
    private final byte[] macAddress;
    private final PortCounters counters = new PortCounters();
    private final AfPacketSockets sockets;
    private final PortSystemCalls system;
    private final MemorySegment errnoState;
    private final MemorySegment statistics;
    private final MemorySegment statisticsLength;
    private final MemorySegment pollFd;

    private final int rxFd;
    private final int txFd;
    private final UnsafeBuffer rxRing;
    private final int rxFrameSize;
    private final RxRing rxReader;
    private final UdpSegmentSplitter splitter;

    private final TpacketV2TxRing tx;

    private int receiveCalls = STATISTICS_INTERVAL_CALLS - FIRST_STATISTICS_CALLS;
    private final int fanoutGroup;

    private boolean closed;

    private AfPacketPort(final AfPacketSockets sockets)
    {
        configuration = sockets.configuration();
        ifIndex = sockets.ifIndex();
        mtu = sockets.mtu();
        macAddress = sockets.macAddress();
        this.sockets = sockets;
        system = sockets.system();
        errnoState = system.errnoState();
        statistics = system.arena().allocate(TPACKET_STATS_V3_SIZE, 8);
        statisticsLength = system.arena().allocate(ValueLayout.JAVA_INT);
        rxFd = sockets.rxFd();
        txFd = sockets.txFd();
        pollFd = system.readablePollFd(rxFd);
        fanoutGroup = sockets.fanoutGroup();
        rxRing = ringBuffer(sockets.rxRingAddress(), sockets.rxRingLength());
        rxFrameSize = sockets.rxFrameSize();
        rxReader = configuration.rxRingVersion() == RxRingVersion.V2 ?
            new TpacketV2RxRing(rxRing, configuration.rxBlockSize(), configuration.rxBlockCount(), rxFrameSize, counters) :
            new TpacketV3RxRing(rxRing, configuration.rxBlockSize(), configuration.rxBlockCount(), v3SlotSize(mtu),
                counters);
        splitter = configuration.segmentationOffload() ? new UdpSegmentSplitter(counters) : null;
        tx = sockets.newTxRing(counters);
    }

    /**
     * @return a buffer over a mapped ring that is a direct {@link java.nio.ByteBuffer} view, not a bare address:
     *         {@link java.util.zip.CRC32} (the ICRC of every frame checked or written in the ring) reads a direct
     *         ByteBuffer in place, where a bare address made {@code Icrc} copy each payload into a heap chunk first
     *         (a second 4 KiB copy per packet, in a worker's receive and transmit paths and the appliance's).
     */
    static UnsafeBuffer ringBuffer(final long address, final long length)
    {
        return new UnsafeBuffer(MemorySegment.ofAddress(address).reinterpret(length).asByteBuffer());
    }

    /**
     * A view of {@code directMemory} made as {@link #ringBuffer} makes a ring's, for the ports that stand in for this
     * one on made-up traffic (a memory port, the daemon's warm-up): C2 compiles the frames' path (the ICRC's
     * {@link java.util.zip.CRC32} on the buffer and its memory session) for the buffer classes it has seen, and code
     * compiled on plain direct buffers was thrown away at the first frame from a real ring (a compile log of the
     * daemon on the bed, 2026-11-26: {@code class_check} traps in {@code Icrc.update} and {@code CRC32.update}).
     * The view does not keep {@code directMemory} alive: the caller holds it as long as the view is used.
     *
     * @param directMemory a direct buffer.
     * @return a view of its whole capacity.
     */
    public static UnsafeBuffer ringView(final ByteBuffer directMemory)
    {
        return ringBuffer(MemorySegment.ofBuffer(directMemory).address(), directMemory.capacity());
    }

    /**
     * Open a port on {@code configuration.interfaceName()} in the calling thread's network namespace.
     *
     * @throws PortException naming the failed step and its errno text: no such interface, no CAP_NET_RAW (EPERM),
     *                       rings the kernel refuses, mmap failure.
     */
    public static AfPacketPort open(final AfPacketConfiguration configuration)
    {
        return open(new AfPacketSockets(configuration, AfPacketSockets.NO_FANOUT));
    }

    private static AfPacketPort open(final AfPacketSockets sockets)
    {
        try
        {
            sockets.openReceiveSocket();
            sockets.openTransmitSocket();
            sockets.joinFanout();
            return new AfPacketPort(sockets);
        }
        catch (final RuntimeException | Error ex)
        {
            sockets.release();
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
            int group = AfPacketSockets.NEW_FANOUT_GROUP;
            for (int i = 0; i < members; i++)
            {
                final AfPacketPort port = open(new AfPacketSockets(configuration, group));
                ports.add(port);
                group = port.fanoutGroup;
            }
            for (final AfPacketPort port : ports)
            {
                port.releaseHoldFilter(configuration.roceOnly());
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

    /**
     * The fanout group is complete: the drop-everything filter gives way to the RoCEv2 filter (attaching one
     * replaces the other at once) or to none.
     */
    private void releaseHoldFilter(final boolean roceOnly)
    {
        if (roceOnly)
        {
            attachRoceOnly();
            return;
        }
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
     * A {@link AfPacketConfiguration#roceOnly() RoCE-only} port outside a fanout group (an endpoint's) swaps its
     * RoCEv2 filter for one that also checks the destination QP; attaching a filter replaces the last one at once.
     */
    @Override
    public boolean receiveOnlyQueuePairs(final int[] qpns, final int count)
    {
        if (!configuration.roceOnly() || fanoutGroup >= 0)
        {
            return false;
        }
        final ClassicBpfProgram narrow = RoceReceiveFilter.forQueuePairs(qpns, count);
        // Never left narrower than asked: a set the kernel refuses (or too many ranges) falls back to all RoCEv2,
        // the filter the port opened with, rather than keep the last set without the new queue pair.
        if (narrow != null && attachFilter(narrow) == 0)
        {
            return true;
        }
        attachRoceOnly();
        return false;
    }

    private void attachRoceOnly()
    {
        attachFilterOrThrow(RoceReceiveFilter.program(), "RoCEv2 only");
    }

    /**
     * @throws PortException naming {@code what} the filter takes, when the kernel refuses it.
     */
    private void attachFilterOrThrow(final ClassicBpfProgram program, final String what)
    {
        final int errno = attachFilter(program);
        if (errno != 0)
        {
            throw new PortException("setsockopt SO_ATTACH_FILTER (" + what + ") on '" + name() + "'", errno);
        }
    }

    /**
     * Mark every frame this port sends with {@code mark} (SO_MARK on its transmit socket: skb->mark, which the
     * loopback interface keeps), so that a port on the same interface can tell them from other senders' frames
     * ({@link #receiveOnlyMarked}). Control-side call, before the first send.
     *
     * @throws PortException if the kernel refuses (SO_MARK needs CAP_NET_RAW or CAP_NET_ADMIN).
     */
    public void markTransmits(final int mark)
    {
        try (Arena scratch = Arena.ofConfined())
        {
            system.setIntOption(scratch, sockets.txFd(), SOL_SOCKET, SO_MARK, mark, "SO_MARK");
        }
    }

    /**
     * Receive only frames whose skb->mark is {@code mark} (a socket filter on the mark, attached at once): on the
     * loopback interface, where every packet socket sees every frame sent, the frames of one sender that
     * {@link #markTransmits marks} its own, and not this port's own transmissions coming back nor the host's
     * other loopback traffic.
     *
     * @throws PortException if the kernel refuses the filter.
     */
    public void receiveOnlyMarked(final int mark)
    {
        attachFilterOrThrow(ClassicBpfProgram.builder()
            .loadMark()
            .jumpIfEqual(mark, 2, 3)
            .returnConstant(-1)
            .returnConstant(0)
            .build(), "mark " + mark + " only");
    }

    /**
     * Receive nothing (a drop-everything socket filter): for a port that only sends.
     *
     * @throws PortException if the kernel refuses the filter.
     */
    public void receiveNothing()
    {
        attachFilterOrThrow(ClassicBpfProgram.dropAll(), "nothing");
    }

    /**
     * @return 0, or the errno of a refused SO_ATTACH_FILTER.
     */
    private int attachFilter(final ClassicBpfProgram program)
    {
        try (Arena scratch = Arena.ofConfined())
        {
            final MemorySegment errno = Libc.allocateErrnoState(scratch);
            return Libc.setsockopt(errno, rxFd, SOL_SOCKET, SO_ATTACH_FILTER, program.toSockFprog(scratch),
                ClassicBpfProgram.SOCK_FPROG_SIZE) < 0 ? Libc.errno(errno) : 0;
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

    /**
     * @return the settings the port runs with: those it was opened with, except segmentation offload on a kernel
     *         whose packet sockets cannot segment UDP ({@link KernelRelease#packetSocketsSegmentUdp()}), where it is
     *         off.
     */
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
        return tx.maxFrameLength();
    }

    /**
     * @return the transmit socket's send buffer as the kernel keeps it (twice {@link
     *         AfPacketConfiguration#txSocketBuffer()} where set): how many bytes of frames taken from the ring the
     *         kernel may hold unsent before it refuses more. Control-side call (a getsockopt).
     */
    public int transmitSocketBuffer()
    {
        return sockets.transmitSocketBuffer();
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

    /**
     * Send one frame on its own, never batched, asking the kernel to finish its L4 checksum from
     * {@code checksumStart} (the field at {@code checksumField} within it) as a host's stack leaves it to a device
     * with checksum offload, or as it is where {@code checksumStart} &lt; 0. For a port that stands in for a host's
     * sender: a port on the same interface then receives the frame flagged checksum-not-ready, as the appliance
     * receives a veth neighbour's (the daemon's warm-up feeder). Needs segmentation offload.
     *
     * @return false (counted) if no transmit slot is free or the length is out of bounds.
     * @throws IllegalStateException if the port has no segmentation offload.
     */
    public boolean sendUnbatched(final DirectBuffer buffer, final int offset, final int length,
        final int checksumStart, final int checksumField)
    {
        return tx.sendUnbatched(buffer, offset, length, checksumStart, checksumField);
    }

    @Override
    public int tryClaim(final int length)
    {
        return tx.tryClaim(length);
    }

    @Override
    public int tryClaim(final int length, final long destinationMac)
    {
        return tx.tryClaim(length, destinationMac);
    }

    @Override
    public MutableDirectBuffer claimBuffer()
    {
        return tx.buffer();
    }

    @Override
    public void commit()
    {
        tx.commit();
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
        return tx.flush();
    }

    /** The receive socket, for {@link PortPoller}. */
    @Override
    public int receiveFd()
    {
        return rxFd;
    }

    /**
     * In V3 a frame takes its header, the Ethernet header (and a tag) and its length, 16-byte aligned: for the
     * backlog, count frames of the MTU.
     */
    private static int v3SlotSize(final int mtu)
    {
        return (TPACKET3_HDR_ROOM + 18 + Math.max(mtu, 64) + 15) & ~15;
    }

    /** Whether the receive ring holds frames not yet handed over (no system call). */
    @Override
    public boolean hasReceiveWork()
    {
        return !closed && rxReader.hasWork();
    }

    @Override
    public int receiveCapacity()
    {
        return rxReader.capacity();
    }

    @Override
    public boolean receiveBacklogAtLeast(final int frames)
    {
        return !closed && rxReader.backlogAtLeast(frames);
    }

    /** Whether frames are queued on the transmit ring that the kernel has not taken yet. */
    @Override
    public boolean hasPendingTransmit()
    {
        return tx.hasPending();
    }

    /**
     * The transmit socket, for {@link PortPoller}: frames a kick left in the ring were refused for want of room in
     * its buffer (EAGAIN), and it polls writable once the kernel has sent enough of what it holds.
     */
    @Override
    public int transmitFd()
    {
        return txFd;
    }

    /**
     * Wait, without spinning, until a receive frame (V2) or block (V3) is ready or {@code timeoutMs} passes: for
     * idle strategies that park on the socket instead of busy polling.
     *
     * @return true if {@link #receive} may have frames to deliver.
     */
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
        return system.awaitReadable(pollFd, timeoutMs);
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
        tx.close();
        sockets.release();
    }

    @Override
    public String toString()
    {
        return "AfPacketPort{" + configuration.interfaceName() + ", ifindex=" + ifIndex + ", " + counters + '}';
    }
}
