package io.netreduce.protocol.port;

import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

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

    private final AfXdpConfiguration configuration;
    private final int ifIndex;
    private final int mtu;
    private final byte[] macAddress;
    private final boolean zeroCopy;
    private final boolean nativeXdp;
    private final int maxTxFrameLength;
    private final PortCounters counters = new PortCounters();
    private final AfXdpSocket socket;
    private final PortSystemCalls system;
    private final MemorySegment errnoState;
    private final MemorySegment statistics;
    private final MemorySegment statisticsLength;
    private final MemorySegment pollFd;
    private final long[] lastStatistics = new long[STATISTICS_SIZE / Long.BYTES];

    private final int xskFd;
    private final UnsafeBuffer umem;
    private final XdpReceiver receiver;
    private final XdpTransmitter transmitter;

    private int receiveCalls;
    private boolean closed;

    private AfXdpPort(final AfXdpSocket socket)
    {
        configuration = socket.configuration();
        ifIndex = socket.ifIndex();
        mtu = socket.mtu();
        macAddress = socket.macAddress();
        zeroCopy = socket.zeroCopy();
        nativeXdp = socket.nativeXdp();
        maxTxFrameLength = socket.layout().maxFrameLength();
        this.socket = socket;
        system = socket.system();
        errnoState = system.errnoState();
        statistics = system.arena().allocate(STATISTICS_SIZE, 8);
        statisticsLength = system.arena().allocate(ValueLayout.JAVA_INT);
        xskFd = socket.xskFd();
        pollFd = system.readablePollFd(xskFd);
        umem = socket.newUmemBuffer();
        receiver = socket.newReceiver(umem, counters);
        transmitter = socket.newTransmitter(umem, counters);
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
        final AfXdpSocket socket = new AfXdpSocket(configuration);
        try
        {
            socket.openSocket();
            socket.attachProgram();
            return new AfXdpPort(socket);
        }
        catch (final RuntimeException | Error ex)
        {
            socket.release();
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

        return receiver.read(handler, limit);
    }

    @Override
    public int tryClaim(final int length)
    {
        return transmitter.tryClaim(length);
    }

    @Override
    public MutableDirectBuffer claimBuffer()
    {
        return transmitter.buffer();
    }

    @Override
    public void commit()
    {
        transmitter.commit();
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
        return transmitter.flush();
    }

    /** The socket, for {@link PortPoller}: it polls readable while the RX ring holds descriptors. */
    @Override
    public int receiveFd()
    {
        return xskFd;
    }

    @Override
    public int receiveCapacity()
    {
        return receiver.capacity();
    }

    @Override
    public boolean receiveBacklogAtLeast(final int frames)
    {
        return !closed && receiver.backlogAtLeast(frames);
    }

    @Override
    public boolean hasReceiveWork()
    {
        return !closed && receiver.hasWork();
    }

    @Override
    public boolean hasPendingTransmit()
    {
        return transmitter.hasPending();
    }

    /** None: the kernel takes a kicked AF_XDP transmit ring's descriptors without a socket buffer to wait for. */
    @Override
    public int transmitFd()
    {
        return -1;
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
        return system.awaitReadable(pollFd, timeoutMs);
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
        receiver.close();
        transmitter.close();
        socket.release();
    }

    @Override
    public String toString()
    {
        return "AfXdpPort{" + configuration.interfaceName() + ", ifindex=" + ifIndex + ", queue=" +
            configuration.queueId() + ", " + mode() + ", " + counters + '}';
    }
}
