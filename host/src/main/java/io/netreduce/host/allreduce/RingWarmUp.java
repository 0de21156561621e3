package io.netreduce.host.allreduce;

import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.InaHeader;
import org.agrona.concurrent.SystemNanoClock;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * Runs a worker's per-packet path before its ring's first call, so that the JIT has compiled it when the first call's
 * packets go: two ranks of a ring, each an {@link RcEndpoint} on a port of its own, call a {@link NetReduceAllReduce}
 * over RC, call after call, until the frames asked for have passed.
 * <p>
 * Why: the JDK's ahead-of-time cache holds classes and profiles, not compiled code, so a fresh worker ran its first
 * call interpreted and in C1 while C2 compiled the path on the same cores: at W = 8, 64 MiB on the 2-core bed each
 * worker's first call took 290-380 ms of CPU against 100-130 in a steady call, and the call 2.0-2.8x the steady time.
 * Paid before the ring is connected (or, in a sidecar, while the trainer builds its model), the compile costs the
 * worker's start instead.
 * <p>
 * The ports: AF_PACKET ports on the loopback interface where the worker may open them ({@link #open}), with the
 * worker's own port settings (rings, segmentation offload), so that the port's code is compiled too (the transmit
 * ring, the segmentation offload's batches and their splitting on arrival: a third of what the JIT still compiled in
 * the first call with memory ports) and every call site sees the port class it will see; otherwise, or by request,
 * {@link MemoryPort}s wired to each other. Each rank has a random locally administered MAC and takes only frames to
 * it; the kernel's own stack drops them (not addressed to the interface), so nothing else on the host sees them.
 * <p>
 * There is no appliance between the two: each rank's ring takes its messages' own tag for the result tag
 * ({@link NetReduceConfig#marksResults()} false), so a rank takes its predecessor's message, arrived by RDMA WRITE WITH
 * IMMEDIATE, for the call's result. Everything else is what a real call runs: the same RC requester and responder
 * (segmentation into the PMTU, ICRC both ways, ACKs, completions), the same all-reduce in the same mode (slot mode's
 * copies in and out of a tensor, or placement in the areas), with the window and message length of the real ring.
 * <p>
 * Nothing here is shared with the worker's endpoint: its own ports, endpoints, memory and QP numbers, all released
 * by {@link #close()}. Not thread-safe: one thread drives it, like an endpoint.
 */
public final class RingWarmUp implements AutoCloseable
{
    /** Frames a warm-up takes by default: about what C2 needed on the bed to compile the per-packet path. */
    public static final long DEFAULT_FRAMES = 65_536;
    /** Most time a warm-up takes by default, whatever it has done by then. */
    public static final long DEFAULT_MAX_NANOS = 5_000_000_000L;

    private static final int RANKS = 2;
    private static final int RING_ID = 1;
    private static final int IFF_UP = 0x1;

    /**
     * What a warm-up did.
     *
     * @param frames  packets the two ranks sent (requests and ACKs).
     * @param calls   all-reduce calls completed on each rank.
     * @param nanos   time taken.
     * @param failure why it stopped early, or null.
     * @param where   what carried it: an interface's name, or memory (and why).
     */
    public record Report(long frames, long calls, long nanos, String failure, String where)
    {
        @Override
        public String toString()
        {
            return String.format(Locale.ROOT, "%d frames, %d calls in %.0f ms on %s%s", frames, calls, nanos / 1e6,
                where, failure == null ? "" : "; stopped: " + failure);
        }
    }

    private final PacketPort[] ports;
    private final RcEndpoint[] endpoints = new RcEndpoint[RANKS];
    private final RingLink[] links = new RingLink[RANKS];
    private final NetReduceAllReduce[] ops = new NetReduceAllReduce[RANKS];
    private final Tensor[] tensors = new Tensor[RANKS];
    private final int areaMessages;
    private final long startNs;
    private String where;
    private long calls;
    private String failure;

    /**
     * @param ports        the two ranks' ports, closed with the warm-up.
     * @param where        what the ports are, for the report.
     * @param rc           the worker's RC settings: the warm-up's endpoints take its PMTU, window and queue depths.
     * @param window       the ring's window (messages).
     * @param msgLen       the ring's MsgLen (packets per message).
     * @param type         the element type the calls carry (slot mode copies it; placement mode only sends it).
     * @param areaMessages messages per call in placement mode (as {@link NetReduceAllReduce#beginPlaced}), or 0 for
     *                     slot mode, each call a tensor of twice the window's messages.
     */
    public RingWarmUp(final PacketPort[] ports, final String where, final RcConfig rc, final int window,
        final int msgLen, final ElementType type, final int areaMessages)
    {
        if (ports.length != RANKS)
        {
            throw new IllegalArgumentException("a warm-up takes " + RANKS + " ports: " + ports.length);
        }
        this.ports = ports.clone();
        this.where = where;
        this.areaMessages = areaMessages;
        final RcConfig config = new RcConfig()
            .pmtu(rc.pmtu())
            .maxOutstandingPackets(rc.maxOutstandingPackets())
            .ackRequestInterval(rc.ackRequestInterval())
            .sendQueueDepth(rc.sendQueueDepth())
            .receiveQueueDepth(rc.receiveQueueDepth())
            .ackCoalescePackets(rc.ackCoalescePackets())
            .ackCoalesceDelayNs(rc.ackCoalesceDelayNs())
            .psnSeed(1);
        final NetReduceConfig ring = new NetReduceConfig(RING_ID, window, msgLen, rc.pmtu(), 10_000_000_000L,
            InaHeader.INET_TAG, InaHeader.INET_TAG);
        final int messages = areaMessages > 0 ? areaMessages : 2 * window;
        final int regionBytes = areaMessages > 0 ? areaMessages * ring.messageBytes() : ring.regionBytes();
        // a random locally administered unicast MAC per warm-up: two at once on one interface take only their own
        final long mac = (new SplittableRandom(System.nanoTime()).nextLong() & 0xFCFF_FFFF_FFFCL) | 0x0200_0000_0000L;
        for (int r = 0; r < RANKS; r++)
        {
            endpoints[r] = new RcEndpoint(this.ports[r], config, SystemNanoClock.INSTANCE, address(r), mac + r);
            links[r] = new RingLink(endpoints[r], SystemNanoClock.INSTANCE, r, RANKS, regionBytes, regionBytes);
        }
        for (int r = 0; r < RANKS; r++)
        {
            final int other = 1 - r;
            links[r].connect(links[other].receiveInfo(), links[other].sendInfo());
        }
        for (int r = 0; r < RANKS; r++)
        {
            ops[r] = areaMessages > 0 ? NetReduceAllReduce.placed(links[r], ring, areaMessages) :
                new NetReduceAllReduce(links[r], ring);
            if (areaMessages == 0)
            {
                final int elements = messages * ring.dataBytesPerMessage() / type.size();
                tensors[r] = new Tensor(type, new UnsafeBuffer(ByteBuffer.allocateDirect(elements * type.size())),
                    0, elements);
            }
        }
        startNs = System.nanoTime();
    }

    /**
     * A warm-up on two {@link MemoryPort}s wired to each other.
     */
    public static RingWarmUp inMemory(final RcConfig rc, final int window, final int msgLen, final ElementType type,
        final int areaMessages)
    {
        final MemoryPort a = new MemoryPort("warm-up-0", MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 1024, 1 << 23);
        final MemoryPort b = new MemoryPort("warm-up-1", MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 1024, 1 << 23);
        MemoryPort.wire(a, b);
        return new RingWarmUp(new PacketPort[] {a, b}, "memory", rc, window, msgLen, type, areaMessages);
    }

    /**
     * A warm-up on two AF_PACKET ports of {@code loopback} (the worker's own port settings on the loopback
     * interface) when that interface is up and the ports open; otherwise {@link #inMemory}, the report saying why.
     *
     * @param loopback the ports' settings, or null for memory ports.
     */
    public static RingWarmUp open(final AfPacketConfiguration loopback, final RcConfig rc, final int window,
        final int msgLen, final ElementType type, final int areaMessages)
    {
        String why = "asked for";
        if (loopback != null)
        {
            why = interfaceDown(loopback.interfaceName());
            if (why == null)
            {
                final PacketPort[] ports = new PacketPort[RANKS];
                try
                {
                    for (int r = 0; r < RANKS; r++)
                    {
                        ports[r] = AfPacketPort.open(loopback);
                    }
                    return new RingWarmUp(ports, loopback.interfaceName(), rc, window, msgLen, type, areaMessages);
                }
                catch (final RuntimeException ex)
                {
                    for (final PacketPort port : ports)
                    {
                        if (port != null)
                        {
                            port.close();
                        }
                    }
                    why = loopback.interfaceName() + ": " + ex.getMessage();
                }
            }
        }
        final RingWarmUp warmUp = inMemory(rc, window, msgLen, type, areaMessages);
        warmUp.where = "memory (" + why + ")";
        return warmUp;
    }

    /**
     * @return why {@code name} cannot carry the warm-up (absent or down), or null if it is up.
     */
    private static String interfaceDown(final String name)
    {
        try
        {
            final int flags = Integer.decode(Files.readString(Path.of("/sys/class/net", name, "flags")).trim());
            return (flags & IFF_UP) != 0 ? null : name + " is down";
        }
        catch (final IOException | RuntimeException ex)
        {
            return name + ": " + ex.getMessage();
        }
    }

    private static InetAddress address(final int rank)
    {
        try
        {
            return InetAddress.getByAddress(new byte[] {(byte)169, (byte)254, 0, (byte)(1 + rank)});
        }
        catch (final UnknownHostException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * One duty cycle of both ranks, beginning their next calls once both have finished the last.
     *
     * @return work done (0 when idle or stopped).
     */
    public int doWork()
    {
        if (failure != null)
        {
            return 0;
        }
        try
        {
            if (ops[0].isDone() && ops[1].isDone())
            {
                for (int r = 0; r < RANKS; r++)
                {
                    if (areaMessages > 0)
                    {
                        ops[r].beginPlaced(areaMessages);
                    }
                    else
                    {
                        ops[r].begin(tensors[r]);
                    }
                }
            }
            int work = 0;
            for (int r = 0; r < RANKS; r++)
            {
                work += endpoints[r].doWork();
            }
            for (int r = 0; r < RANKS; r++)
            {
                work += ops[r].poll();
            }
            if (ops[0].isDone() && ops[1].isDone())
            {
                calls++;
            }
            return work;
        }
        catch (final RuntimeException ex)
        {
            failure = ex.toString();
            return 0;
        }
    }

    /**
     * @return packets the two ranks' queue pairs have sent so far (requests and ACKs).
     */
    public long frames()
    {
        long frames = 0;
        for (final RingLink link : links)
        {
            frames += link.sendQp().counters().packetsSent() + link.receiveQp().counters().packetsSent();
        }
        return frames;
    }

    /**
     * Run until {@code frames} frames have passed or {@code maxNanos} have gone, whichever comes first.
     */
    public Report run(final long frames, final long maxNanos)
    {
        final long deadline = startNs + maxNanos;
        while (failure == null && frames() < frames && System.nanoTime() - deadline < 0)
        {
            doWork();
        }
        return report();
    }

    /**
     * @return what it has done so far.
     */
    public Report report()
    {
        return new Report(frames(), calls, System.nanoTime() - startNs, failure, where);
    }

    /**
     * Run a warm-up of {@code frames} frames (at most {@link #DEFAULT_MAX_NANOS}) on {@link #open}'s ports and release
     * it; 0 frames runs none.
     *
     * @return what it did, or null if it ran none.
     */
    public static Report runOnce(final AfPacketConfiguration loopback, final RcConfig rc, final int window,
        final int msgLen, final ElementType type, final int areaMessages, final long frames)
    {
        if (frames <= 0)
        {
            return null;
        }
        try (RingWarmUp warmUp = open(loopback, rc, window, msgLen, type, areaMessages))
        {
            return warmUp.run(frames, DEFAULT_MAX_NANOS);
        }
    }

    @Override
    public void close()
    {
        for (final RcEndpoint endpoint : endpoints)
        {
            if (endpoint != null)
            {
                endpoint.close();
            }
        }
    }
}
