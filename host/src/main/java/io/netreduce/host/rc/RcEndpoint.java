package io.netreduce.host.rc;

import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.port.Doorbell;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.MutableDirectBuffer;
import org.agrona.collections.Int2ObjectHashMap;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.NanoClock;
import org.agrona.concurrent.UnsafeBuffer;

import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.security.SecureRandom;
import java.util.SplittableRandom;

/**
 * A software RoCEv2 NIC: owns one {@link PacketPort}, a {@link MemoryRegistry} and any number of
 * {@link QueuePair}s keyed by local QPN, and runs them all from one thread.
 * <p>
 * Duty cycle ({@link #doWork()}): read the clock once; receive a batch of frames, parse each, check it is
 * addressed to this endpoint's MAC, pass it through the fault injector, verify its ICRC (bad ones are dropped and
 * counted, as a NIC does) and hand it to the queue pair named by its destination QP; then let every queue pair run
 * its timers, send its ACK/NAK/CNPs and transmit requests; finally flush the port.
 * <p>
 * Request packets are written straight into a claimed slot of the port's transmit ring ({@link #claim}); the
 * few responses (ACK, NAK, CNP) are built in one scratch buffer and copied in by {@link PacketPort#send}. No frame
 * is kept after that, so the data path allocates nothing.
 */
public final class RcEndpoint implements Agent, AutoCloseable
{
    static final int TX_SENT = 0;
    static final int TX_DROPPED = 1;
    static final int TX_RING_FULL = 2;

    private static final int TX_BUFFER_LENGTH = 128 + 4096 + 64;

    private final PacketPort port;
    private final RcConfig config;
    private final NanoClock clock;
    private EndpointIdleStrategy idleStrategy;
    private TraceRecorder trace = TraceRecorder.OFF;
    private final InetAddress localIp;
    private final long localMac;
    private final MemoryRegistry memory;
    private final FaultInjector faults;
    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();
    private final UnsafeBuffer txBuffer = new UnsafeBuffer(ByteBuffer.allocateDirect(TX_BUFFER_LENGTH));
    private final Int2ObjectHashMap<QueuePair> qpsByNumber = new Int2ObjectHashMap<>();
    private final SplittableRandom psnRandom;
    private final FrameHandler frameHandler = this::onFrame;
    private QueuePair[] qps = new QueuePair[0];
    private boolean portFiltersQueuePairs;
    private int nextQpn;
    private long nowNs;

    private long framesReceived;
    private long notRoce;
    private long malformed;
    private long notForUs;
    private long unknownQp;
    private long icrcErrors;

    /**
     * @param port     the port this endpoint owns (closed with it).
     * @param config   tunables.
     * @param clock    time source for every timer; replace it in tests.
     * @param localIp  this endpoint's address (IPv4 or IPv6): the source of every frame it sends.
     * @param localMac this endpoint's MAC (48 bits); frames to another unicast MAC are ignored.
     */
    public RcEndpoint(
        final PacketPort port,
        final RcConfig config,
        final NanoClock clock,
        final InetAddress localIp,
        final long localMac)
    {
        this.port = port;
        this.config = config;
        this.clock = clock;
        this.localIp = localIp;
        this.localMac = localMac;
        this.memory = new MemoryRegistry((int)(localMac ^ (localMac >>> 24)) * 0x9E37_79B9);
        this.faults = new FaultInjector(config.sendDropProbability(), config.receiveDropProbability(),
            config.faultSeed());
        // Random start PSNs unless asked otherwise: a new job on reused QP numbers must not repeat the old job's
        // start PSNs, or the appliance could take its first messages for retransmissions of the old ones.
        this.psnRandom = new SplittableRandom(
            (config.psnSeed() != null ? config.psnSeed() : new SecureRandom().nextLong()) ^ localMac);
        this.nextQpn = config.firstQpn();
        this.nowNs = clock.nanoTime();
    }

    /**
     * Create a queue pair with the next free QPN and a random start PSN.
     */
    public QueuePair createQueuePair(final CompletionQueue sendCq, final CompletionQueue recvCq)
    {
        while (qpsByNumber.containsKey(nextQpn))
        {
            nextQpn++;
        }
        return createQueuePair(nextQpn++, sendCq, recvCq);
    }

    /**
     * Create a queue pair with a chosen QPN (1..2^24-1, unique on this endpoint).
     */
    public QueuePair createQueuePair(final int qpn, final CompletionQueue sendCq, final CompletionQueue recvCq)
    {
        if (qpn <= 1 || qpn > 0xFF_FFFF || qpsByNumber.containsKey(qpn))
        {
            throw new IllegalArgumentException("QPN unavailable: " + qpn);
        }
        final QueuePair qp = new QueuePair(this, qpn, psnRandom.nextInt(1 << 24), config, sendCq, recvCq);
        qpsByNumber.put(qpn, qp);
        qps = Arrays.copyOf(qps, qps.length + 1);
        qps[qps.length - 1] = qp;
        // Before the QPN is given to any peer: from here the kernel hands this endpoint's port only RoCE frames to
        // its own queue pairs (where the port can filter), as an RDMA NIC would, not every endpoint's on the host.
        final int[] numbers = new int[qps.length];
        for (int i = 0; i < qps.length; i++)
        {
            numbers[i] = qps[i].qpn();
        }
        portFiltersQueuePairs = port.receiveOnlyQueuePairs(numbers, numbers.length);
        return qp;
    }

    /**
     * @return whether the kernel filters this endpoint's frames by its queue pairs' numbers
     *         ({@link PacketPort#receiveOnlyQueuePairs}); false before the first queue pair, or on a port that cannot.
     */
    public boolean portFiltersQueuePairs()
    {
        return portFiltersQueuePairs;
    }

    public QueuePair queuePair(final int qpn)
    {
        return qpsByNumber.get(qpn);
    }

    public MemoryRegistry memory()
    {
        return memory;
    }

    /**
     * Shorthand for {@code memory().register(length)}.
     */
    public MemoryRegion registerMemory(final int length)
    {
        return memory.register(length);
    }

    /**
     * Register memory that already exists (a direct buffer, e.g. a slice of a file mapping shared with another
     * process): the region is that memory, not a copy of it. Shorthand for {@code memory().register(buffer)}.
     */
    public MemoryRegion registerMemory(final java.nio.ByteBuffer buffer)
    {
        return memory.register(buffer);
    }

    public InetAddress localIp()
    {
        return localIp;
    }

    public long localMac()
    {
        return localMac;
    }

    public RcConfig config()
    {
        return config;
    }

    public FaultInjector faults()
    {
        return faults;
    }

    public PacketPort port()
    {
        return port;
    }

    @Override
    public String roleName()
    {
        return "rc-endpoint-" + port.name();
    }

    /**
     * Record this endpoint's transport events (retransmissions and what triggered them) into {@code recorder}.
     */
    public void trace(final TraceRecorder recorder)
    {
        this.trace = recorder;
    }

    public TraceRecorder trace()
    {
        return trace;
    }

    /**
     * @return the endpoint's clock now (the time its timers and traces use).
     */
    public long nanoTime()
    {
        return clock.nanoTime();
    }

    /**
     * @return the earliest time a queue pair's timer or pending transmission needs the duty cycle (now if one
     *         has work it can do), or {@link Long#MAX_VALUE}: how long an idle endpoint may block waiting for frames.
     */
    public long nextDeadlineNs(final long nowNs)
    {
        long deadline = Long.MAX_VALUE;
        for (final QueuePair qp : qps)
        {
            deadline = QueuePair.earlier(deadline, qp.nextDeadlineNs(nowNs));
        }
        return deadline;
    }

    /**
     * The driving loop found no frames and is about to wait: make every ACK its queue pairs are still coalescing due
     * on the next duty cycle (see {@link EndpointIdleStrategy}).
     *
     * @return how many queue pairs had one pending.
     */
    public int expediteAcks()
    {
        int expedited = 0;
        for (final QueuePair qp : qps)
        {
            if (qp.expediteAck())
            {
                expedited++;
            }
        }
        return expedited;
    }

    /**
     * @return the idle strategy for the loop that drives this endpoint on a core it shares (see
     *         {@link EndpointIdleStrategy}); one per endpoint, as the endpoint has one driving thread.
     */
    public EndpointIdleStrategy idleStrategy()
    {
        if (idleStrategy == null)
        {
            idleStrategy = new EndpointIdleStrategy(this, clock, null);
        }
        return idleStrategy;
    }

    /**
     * @param doorbell rung by another thread that hands the driving loop work (a sidecar's trainer requests): the
     *                 strategy then also wakes on it, and may block longer between timers.
     * @return the endpoint's idle strategy, replacing any made before (one driving thread per endpoint).
     */
    public EndpointIdleStrategy idleStrategy(final Doorbell doorbell)
    {
        if (idleStrategy != null)
        {
            idleStrategy.close();
        }
        idleStrategy = new EndpointIdleStrategy(this, clock, doorbell);
        return idleStrategy;
    }

    @Override
    public int doWork()
    {
        nowNs = clock.nanoTime();
        int work = port.receive(frameHandler, config.receiveBatch());
        for (final QueuePair qp : qps)
        {
            work += qp.doWork(nowNs);
        }
        work += port.flush();
        return work;
    }

    private void onFrame(final MutableDirectBuffer buffer, final int offset, final int length, final int flags)
    {
        framesReceived++;
        final int status = frame.wrap(buffer, offset, length);
        if (status != RoceFrame.OK)
        {
            if (status == RoceFrame.NOT_ROCE)
            {
                notRoce++;
            }
            else
            {
                malformed++;
            }
            return;
        }
        final long dstMac = EthernetHeader.dstMac(buffer, offset);
        if (frame.vlanCount() != 0 || (flags & FrameHandler.FLAG_VLAN_TAG_STRIPPED) != 0 ||
            (localMac != 0 && dstMac != localMac))
        {
            // A tagged frame belongs to a VLAN, and this endpoint's interface is untagged (an RDMA NIC takes a
            // tagged frame only for a GID of that VLAN): a host that tags frames with a ring member's addresses
            // must not reach its queue pairs past the appliance.
            // Our own transmissions looped back by a packet socket, or traffic for another host on the segment.
            notForUs++;
            return;
        }
        final QueuePair qp = qpsByNumber.get(frame.destQp());
        if (qp == null)
        {
            unknownQp++;
            return;
        }
        if (faults.dropOnReceive())
        {
            qp.counters().receiveDrops++;
            return;
        }
        if (!icrc.verify(frame))
        {
            icrcErrors++;
            qp.counters().icrcErrors++;
            return;
        }
        qp.onFrame(frame, nowNs);
    }

    UnsafeBuffer txBuffer()
    {
        return txBuffer;
    }

    /** {@link #claim}: the fault injector dropped the frame; write it into {@link #txBuffer()}, where it dies. */
    static final int CLAIM_DROPPED = -2;
    /** {@link #claim}: no transmit slot free; try again on a later duty cycle. */
    static final int CLAIM_RING_FULL = -1;

    /**
     * Claim the port's next transmit slot for a frame of {@code length} bytes to {@code destinationMac}, to be
     * written in place into {@link #claimBuffer()} and handed over with {@link #commitClaim}: a request packet's
     * payload then goes from registered memory into the ring once (with segmentation offload straight into its
     * batch, {@link PacketPort#tryClaim(int, long)}), where building it in {@link #txBuffer()}, sending that and
     * batching it copied it three times (the two copies after the scratch buffer were 6 % of a rank's endpoint
     * thread in a profile of the loaded bed).
     *
     * @return the frame's index in {@link #claimBuffer()}, {@link #CLAIM_DROPPED} (counted; write the frame into
     *         {@link #txBuffer()} and forget it) or {@link #CLAIM_RING_FULL} (counted).
     */
    int claim(final QpCounters counters, final int length, final long destinationMac)
    {
        if (faults.dropOnSend())
        {
            counters.sendDrops++;
            return CLAIM_DROPPED;
        }
        final int index = port.tryClaim(length, destinationMac);
        if (index < 0)
        {
            counters.transmitRingFull++;
            return CLAIM_RING_FULL;
        }
        return index;
    }

    /**
     * @return the buffer a successful {@link #claim} indexes into.
     */
    MutableDirectBuffer claimBuffer()
    {
        return port.claimBuffer();
    }

    /**
     * Queue the claimed frame for the next flush.
     */
    void commitClaim(final QpCounters counters)
    {
        port.commit();
        counters.packetsSent++;
    }

    /**
     * Send the frame built in {@link #txBuffer()}, unless the fault injector drops it.
     */
    int transmit(final QpCounters counters, final int length)
    {
        if (faults.dropOnSend())
        {
            counters.sendDrops++;
            return TX_DROPPED;
        }
        if (!port.send(txBuffer, 0, length))
        {
            counters.transmitRingFull++;
            return TX_RING_FULL;
        }
        counters.packetsSent++;
        return TX_SENT;
    }

    public long framesReceived()
    {
        return framesReceived;
    }

    /** Frames that were not RoCEv2 (ARP, ICMP, TCP...). */
    public long notRoce()
    {
        return notRoce;
    }

    /** RoCEv2 frames that failed to parse (truncated, malformed, unknown opcode). */
    public long malformed()
    {
        return malformed;
    }

    /** RoCEv2 frames addressed to another MAC, or VLAN-tagged (another VLAN's). */
    public long notForUs()
    {
        return notForUs;
    }

    /** RoCEv2 frames for a QPN this endpoint does not have. */
    public long unknownQp()
    {
        return unknownQp;
    }

    /** Frames dropped for a bad ICRC (all queue pairs). */
    public long icrcErrors()
    {
        return icrcErrors;
    }

    @Override
    public void onClose()
    {
        port.close();
        if (idleStrategy != null)
        {
            idleStrategy.close();
        }
    }

    @Override
    public void close()
    {
        port.close();
        if (idleStrategy != null)
        {
            idleStrategy.close();
        }
    }
}
