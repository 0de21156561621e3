package io.netreduce.host.allreduce;

import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.Ipv6Header;
import org.agrona.concurrent.SystemNanoClock;
import org.agrona.concurrent.UnsafeBuffer;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * Runs a worker's per-packet path before its ring's first call, so that the JIT has compiled it when the first call's
 * packets go: the ranks of a small ring, each an {@link RcEndpoint} on a port of its own, call a
 * {@link NetReduceAllReduce} over RC, call after call, until the packets asked for have passed.
 * <p>
 * Why: the JDK's ahead-of-time cache holds classes and profiles, not compiled code, so a fresh worker ran its first
 * call interpreted and in C1 while C2 compiled the path on the same cores: at W = 8, 64 MiB on the 2-core bed each
 * worker's first call took 290-380 ms of CPU against 100-130 in a steady call, and the call 2.0-2.8x the steady time.
 * Paid before the ring is connected (or, in a sidecar, while the trainer builds its model), the compile costs the
 * worker's start instead.
 * <p>
 * The ports are {@link MemoryPort}s wired to each other: the port's own code (the AF_PACKET rings, the segmentation
 * offload's batches and their splitting) still compiles in the first call. AF_PACKET ports on the loopback interface
 * would compile it too, and did, but opening them (two sockets each, with their rings) took 2-6 s per worker with
 * eight workers starting at once on the bed's two cores (about 50 ms a port alone), longer than all it saved.
 * <p>
 * Compiled code is only as good as the profile it was compiled from: a branch the warm-up never took is compiled as
 * a trap, and the first call that takes it throws the method back to the interpreter and has it compiled again, in
 * the first call. So the warm-up takes the branches a real ring takes where it can: frames that are not RoCE (ARP,
 * IPv4 TCP, ICMPv6) among the ring's, as a real interface carries, and {@value #ROUNDS} rounds, each on new
 * endpoints, so that what an endpoint does once at its start (caches filled, first buffers) is not compiled away.
 * <p>
 * There is no appliance between the ranks: a rank takes its predecessor's message, arrived by RDMA WRITE WITH
 * IMMEDIATE, for the call's result. Each rank writes a tag of its own, and takes its predecessor's for the result tag,
 * so that its ring tells results from its own messages ({@link NetReduceConfig#marksResults()}) as a real ring's does:
 * with one tag for both, that check's branch was compiled the other way, and a real ring's first result threw the
 * receive path back to the interpreter (an {@code unstable_if} trap, seen in a sidecar agent's log). For the same
 * reason, on ports ({@link #onPorts}) a ring has three ranks, so that a rank's requests (to its successor) and its
 * ACKs (to its predecessor) go to different MACs, as in any real ring of three or more, and the second round, a short
 * one, has every other call's packets from its first rank marked CE (as an appliance or switch marks them under load),
 * so that the responder's and the window's marked branches are in the profile: the appliance marks results whenever
 * its receive ring backs up. Everywhere, an idle duty cycle separates the calls (a real ring's timers are checked
 * disarmed between calls) and the third round's endpoints take a few frames a turn (a real ring's ACKs come while
 * more is in flight). Everything else is what a real call runs: the same RC requester and responder
 * (segmentation into the PMTU, ICRC both ways, ACKs, completions), the same all-reduce in the same mode (slot mode's
 * copies in and out of a tensor, or placement in the areas), with the window and message length of the real ring.
 * <p>
 * Nothing here is shared with the worker's endpoint: its own ports, endpoints, memory and QP numbers, all released
 * by {@link #close()}. Not thread-safe: one thread drives it, like an endpoint.
 */
public final class RingWarmUp implements AutoCloseable
{
    /**
     * Packets a warm-up takes by default: on the bed (W = 8, eight workers starting at once on two cores) 16,384 took
     * as much off the first call as 65,536 (1569 against 1570 ms, medians of 3; none: 2139) in 1.2-1.5 s of each
     * worker's start against 3.0-3.5 s.
     */
    public static final long DEFAULT_FRAMES = 16_384;
    /** Most time a warm-up takes by default, whatever it has done by then. */
    public static final long DEFAULT_MAX_NANOS = 5_000_000_000L;
    /** Rounds the packets are spread over, each on new endpoints. */
    public static final int ROUNDS = 4;
    /** Ranks of the ring in memory: a wired pair of memory ports. */
    public static final int RANKS = 2;
    /**
     * Ranks of the ring on ports ({@link #onPorts}): three, so that a rank's successor and predecessor differ, as in a
     * real ring of three or more (its requests and its ACKs then go to different MACs).
     */
    public static final int PORT_RANKS = 3;
    /** Duty cycles each round's endpoints turn before their queue pairs are connected. */
    static final int UNCONNECTED_TURNS = 8;
    /** The InA tag rank r writes: this plus r ("NRW0", "NRW1", ...); rank r takes rank r - 1's for its results. */
    static final int TAG_BASE = 0x4E52_5730;
    /**
     * Frames an endpoint takes from its port per duty cycle in round {@value #SMALL_BATCH_ROUND}. One thread drives
     * every rank, so with the worker's batch a receiver took a sender's whole burst in one turn and ACKed all of it
     * at once: every ACK the requesters saw left nothing outstanding, and the retransmission timer was always
     * disarmed when checked. A real ring's ACKs come while more is in flight, and those branches, compiled as traps,
     * threw the requester's code away in a sidecar agent's first session. A burst taken a few frames at a time is
     * ACKed in parts. Not in the first round: its code still runs interpreted, and the slower ACKs let the worker's
     * retransmission timer fire (go-back-N compiled instead of a clean call's path); in a later round the compiled
     * code meets the new branches during the warm-up, where its recompilation costs no call.
     */
    static final int SMALL_RECEIVE_BATCH = 16;
    /** The round with {@link #SMALL_RECEIVE_BATCH}. */
    private static final int SMALL_BATCH_ROUND = 3;
    /** The least retransmission timeout of that round. */
    private static final long SMALL_BATCH_TIMEOUT_NS = 500_000_000L;
    /** The ECN field's bits in a traffic class. */
    private static final int ECN_MASK = 0x3;
    /** Which round is marked (on ports), and the share of a round's packets it takes (the window shrinks in it). */
    private static final int MARKED_ROUND = 2;
    private static final int MARKED_ROUND_DIVISOR = 4;

    private static final int RING_ID = 1;
    /** Duty cycles between two rounds of frames that are not RoCE. */
    private static final int STRAY_INTERVAL = 64;
    private static final int STRAY_LENGTH = 60;
    private static final int PROTOCOL_TCP = 6;
    private static final int PROTOCOL_ICMPV6 = 58;
    private static final byte[] LINK_LOCAL = {(byte)0xFE, (byte)0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

    /**
     * What a warm-up did.
     *
     * @param frames  packets the ranks' queue pairs sent (requests and ACKs).
     * @param resent  packets of those that were retransmissions (none expected: a port that lost packets).
     * @param rounds  rounds begun, each on new endpoints.
     * @param strays  frames that were not RoCE (the ARP and TCP frames sent among the ring's), counted and let be.
     * @param calls   all-reduce calls completed on every rank.
     * @param marked  results that came marked CE (the marked round's, on ports), for the ranks' windows.
     * @param dropped frames the ports dropped on receive (a full ring or queue: what the resent packets replaced).
     * @param nanos   time taken.
     * @param failure why it stopped early, or null.
     */
    public record Report(long frames, long resent, long rounds, long strays, long calls, long marked, long dropped,
        long nanos, String failure)
    {
        @Override
        public String toString()
        {
            return String.format(Locale.ROOT, "%d packets (%d resent, %d dropped), %d calls in %d rounds, %d " +
                "results marked CE, %d stray frames, in %.0f ms%s", frames, resent, dropped, calls, rounds, marked,
                strays, nanos / 1e6, failure == null ? "" : "; stopped: " + failure);
        }
    }

    private final PacketPort[] ports;
    private final RcConfig config;
    private final RcConfig smallBatchConfig;
    private final NetReduceConfig ring;
    private final boolean marks;
    private final long droppedBefore;
    private final ElementType type;
    private final int areaMessages;
    private final long framesPerRound;
    private final long startNs;
    private final SplittableRandom random = new SplittableRandom(System.nanoTime());
    private final UnsafeBuffer stray = new UnsafeBuffer(ByteBuffer.allocateDirect(STRAY_LENGTH));
    private Round round;
    private long framesBefore;
    private long calls;
    private long turns;
    private long resent;
    private long strays;
    private long rounds;
    private long marked;
    private String failure;

    /**
     * @param rc             the worker's RC settings: the warm-up's endpoints take its PMTU, window, queue depths and
     *                       retransmission timeouts.
     * @param window         the ring's window (messages).
     * @param msgLen         the ring's MsgLen (packets per message).
     * @param type           the element type the calls carry (slot mode copies it; placement mode only sends it).
     * @param areaMessages   messages per call in placement mode (as {@link NetReduceAllReduce#beginPlaced}), or 0 for
     *                       slot mode, each call a tensor of twice the window's messages.
     * @param framesPerRound packets of a round before the next round's new endpoints.
     */
    private RingWarmUp(final PacketPort[] ports, final RcConfig rc, final int window, final int msgLen,
        final ElementType type, final int areaMessages, final long framesPerRound, final boolean marks)
    {
        this.startNs = System.nanoTime();
        this.ports = ports;
        this.marks = marks;
        this.droppedBefore = dropped();
        this.config = settings(rc);
        // and a timeout no descheduling of this one thread reaches: with ACKs in parts, packets stay outstanding
        // across duty cycles, and the worker's 4 ms fired on the loaded bed whenever the process waited for a core
        // (eight agents starting at once resent 10-15 % of their packets); its value is data, not code
        final long timeoutNs = Math.max(rc.retransmitTimeoutNs(), SMALL_BATCH_TIMEOUT_NS);
        this.smallBatchConfig = settings(rc).receiveBatch(Math.min(SMALL_RECEIVE_BATCH, rc.receiveBatch()))
            .retransmitTimeoutNs(timeoutNs)
            .maxRetransmitTimeoutNs(Math.max(timeoutNs, rc.maxRetransmitTimeoutNs()));
        this.ring = new NetReduceConfig(RING_ID, window, msgLen, rc.pmtu(), 10_000_000_000L, TAG_BASE, TAG_BASE + 1);
        this.type = type;
        this.areaMessages = areaMessages;
        this.framesPerRound = Math.max(1, framesPerRound);
        try
        {
            this.round = new Round();
        }
        catch (final RuntimeException ex)
        {
            closeAll(ports);
            throw ex;
        }
    }

    /**
     * @return the warm-up's endpoint settings from the worker's.
     */
    private static RcConfig settings(final RcConfig rc)
    {
        return new RcConfig()
            .pmtu(rc.pmtu())
            .maxOutstandingPackets(rc.maxOutstandingPackets())
            .ackRequestInterval(rc.ackRequestInterval())
            .sendQueueDepth(rc.sendQueueDepth())
            .receiveQueueDepth(rc.receiveQueueDepth())
            .ackCoalescePackets(rc.ackCoalescePackets())
            .ackCoalesceDelayNs(rc.ackCoalesceDelayNs())
            // the worker's timeouts: on shared cores a shorter one fires while a rank waits for the CPU, and the
            // warm-up then compiles go-back-N instead of the path a clean call takes
            .retransmitTimeoutNs(rc.retransmitTimeoutNs())
            .maxRetransmitTimeoutNs(Math.max(rc.retransmitTimeoutNs(), rc.maxRetransmitTimeoutNs()))
            .trafficClass(rc.trafficClass())
            .receiveBatch(rc.receiveBatch());
    }

    /**
     * @return rank {@code rank}'s ring of {@code ranks}: its own tag on its messages, its predecessor's on results.
     */
    private NetReduceConfig ringOf(final int rank, final int ranks)
    {
        return new NetReduceConfig(ring.ringId(), ring.window(), ring.msgLen(), ring.payloadSize(), ring.timeoutNs(),
            TAG_BASE + rank, TAG_BASE + (rank + ranks - 1) % ranks, ring.congestion());
    }

    /**
     * A warm-up on {@value #RANKS} {@link MemoryPort}s wired to each other, {@code frames} packets in {@value #ROUNDS}
     * rounds.
     */
    public static RingWarmUp inMemory(final RcConfig rc, final int window, final int msgLen, final ElementType type,
        final int areaMessages, final long frames)
    {
        return new RingWarmUp(memoryPorts(), rc, window, msgLen, type, areaMessages, frames / ROUNDS, false);
    }

    /**
     * A warm-up on {@value #PORT_RANKS} ports that reach each other, e.g. AF_PACKET ports of the loopback interface
     * with a worker's own port settings: then the port's own code (its rings, the segmentation offload's batches and
     * their splitting) is compiled too, and every call site sees the port class a real ring will. Each round's ranks
     * take new random MACs and only frames to them; one short round has the first rank's packets marked CE. The ports
     * are closed with the warm-up, also when this throws.
     */
    public static RingWarmUp onPorts(final PacketPort[] ports, final RcConfig rc, final int window, final int msgLen,
        final ElementType type, final int areaMessages, final long frames)
    {
        if (ports.length != PORT_RANKS)
        {
            closeAll(ports);
            throw new IllegalArgumentException("a warm-up takes " + PORT_RANKS + " ports: " + ports.length);
        }
        return new RingWarmUp(ports.clone(), rc, window, msgLen, type, areaMessages, frames / ROUNDS, true);
    }

    private static PacketPort[] memoryPorts()
    {
        final MemoryPort a = new MemoryPort("warm-up-0", MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 1024, 1 << 23);
        final MemoryPort b = new MemoryPort("warm-up-1", MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 1024, 1 << 23);
        MemoryPort.wire(a, b);
        return new PacketPort[] {a, b};
    }

    private long dropped()
    {
        long dropped = 0;
        for (final PacketPort port : ports)
        {
            dropped += port.counters().rxDropped() + port.counters().rxTruncated();
        }
        return dropped;
    }

    private static void closeAll(final PacketPort[] ports)
    {
        for (final PacketPort port : ports)
        {
            port.close();
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
     * One duty cycle of every rank, beginning their next calls once all have finished the last, and the next round
     * once this one has sent its packets.
     *
     * @return work done (0 when stopped).
     */
    public int doWork()
    {
        if (failure != null)
        {
            return 0;
        }
        try
        {
            if (round.idle() && round.frames() >= round.quota())
            {
                retireRound();
                round = new Round();
            }
            if ((++turns & (STRAY_INTERVAL - 1)) == 0)
            {
                round.sendStrays();
            }
            return round.doWork();
        }
        catch (final RuntimeException ex)
        {
            failure = ex.toString();
            return 0;
        }
    }

    /**
     * @return packets the ranks' queue pairs have sent so far, every round.
     */
    public long frames()
    {
        return framesBefore + (round != null ? round.frames() : 0);
    }

    /**
     * @return whether the warm-up is over: stopped by a failure, {@code frames} packets passed, or {@code maxNanos}
     * gone since it began.
     */
    public boolean finished(final long frames, final long maxNanos)
    {
        return failure != null || frames() >= frames || System.nanoTime() - startNs >= maxNanos;
    }

    /**
     * Run until {@link #finished}.
     */
    public Report run(final long frames, final long maxNanos)
    {
        while (!finished(frames, maxNanos))
        {
            doWork();
        }
        return report();
    }

    /**
     * @return what it has done so far (since it began to open its ports).
     */
    public Report report()
    {
        return new Report(frames(), resent + (round != null ? round.resent() : 0), rounds,
            strays + (round != null ? round.strays() : 0), calls, marked + (round != null ? round.marked() : 0),
            dropped() - droppedBefore, System.nanoTime() - startNs, failure);
    }

    /**
     * Run a warm-up of {@code frames} packets (at most {@link #DEFAULT_MAX_NANOS}) {@link #inMemory} and release it;
     * 0 frames runs none.
     *
     * @return what it did, or null if it ran none.
     */
    public static Report runOnce(final RcConfig rc, final int window, final int msgLen, final ElementType type,
        final int areaMessages, final long frames)
    {
        if (frames <= 0)
        {
            return null;
        }
        final RingWarmUp warmUp = inMemory(rc, window, msgLen, type, areaMessages, frames);
        try
        {
            warmUp.run(frames, DEFAULT_MAX_NANOS);
        }
        finally
        {
            warmUp.close();
        }
        return warmUp.report();
    }

    @Override
    public void close()
    {
        if (round != null)
        {
            retireRound();
        }
        closeAll(ports);
    }

    /**
     * Add the current round's counts to the finished rounds' and drop it (null until the next one is made, so that
     * a round that fails to be made is not counted twice).
     */
    private void retireRound()
    {
        framesBefore += round.frames();
        resent += round.resent();
        strays += round.strays();
        marked += round.marked();
        round = null;
    }

    /**
     * One round: a ring of one rank per port, on endpoints of its own (left to the collector at the round's end: an
     * endpoint's close would close its port, which the next round takes).
     */
    private final class Round
    {
        private final long[] macs;
        private final RcEndpoint[] endpoints;
        private final RingLink[] links;
        private final NetReduceAllReduce[] ops;
        private final Tensor[] tensors;
        private final boolean marked;
        private boolean inCall;
        private boolean rested = true;
        private long begun;

        Round()
        {
            rounds++;
            marked = marks && rounds == MARKED_ROUND;
            final int ranks = ports.length;
            macs = new long[ranks];
            endpoints = new RcEndpoint[ranks];
            links = new RingLink[ranks];
            ops = new NetReduceAllReduce[ranks];
            tensors = new Tensor[ranks];
            final int messages = areaMessages > 0 ? areaMessages : 2 * ring.window();
            final int regionBytes = areaMessages > 0 ? areaMessages * ring.messageBytes() : ring.regionBytes();
            // new locally administered unicast MACs each round: what the last round left in the ports (late ACKs,
            // retransmissions) is addressed to none of this round's endpoints
            final long base = random.nextLong() & 0xFCFF_FFFF_FF00L | 0x0200_0000_0000L;
            for (int r = 0; r < ranks; r++)
            {
                macs[r] = base + r;
                final RcConfig settings = rounds == SMALL_BATCH_ROUND ? smallBatchConfig : config;
                endpoints[r] = new RcEndpoint(ports[r], settings.psnSeed(random.nextLong()),
                    SystemNanoClock.INSTANCE, address(r), macs[r]);
                links[r] = new RingLink(endpoints[r], SystemNanoClock.INSTANCE, r, ranks, regionBytes,
                    regionBytes);
            }
            // a few duty cycles with the queue pairs made but not yet connected, as a session's endpoint turns while
            // its trainer connects the ring: without them the queue pairs' state checks were compiled for connected
            // ones only, and the first turn of a real session before its connect threw the endpoint's duty cycle
            // back to the interpreter, to be compiled again in the first call (an agent's compile log, 2026-11-27)
            for (int turn = 0; turn < UNCONNECTED_TURNS; turn++)
            {
                for (final RcEndpoint endpoint : endpoints)
                {
                    endpoint.doWork();
                }
            }
            for (int r = 0; r < ranks; r++)
            {
                links[r].connect(links[(r + 1) % ranks].receiveInfo(), links[(r + ranks - 1) % ranks].sendInfo());
            }
            for (int r = 0; r < ranks; r++)
            {
                final NetReduceConfig rankRing = ringOf(r, ranks);
                ops[r] = areaMessages > 0 ? NetReduceAllReduce.placed(links[r], rankRing, areaMessages) :
                    new NetReduceAllReduce(links[r], rankRing);
                if (areaMessages == 0)
                {
                    final int elements = messages * ring.dataBytesPerMessage() / type.size();
                    tensors[r] = new Tensor(type,
                        new UnsafeBuffer(ByteBuffer.allocateDirect(elements * type.size())), 0, elements);
                }
            }
        }

        /**
         * @return packets this round sends before the next: the marked round fewer, as its window shrinks.
         */
        long quota()
        {
            return marked ? Math.max(1, framesPerRound / MARKED_ROUND_DIVISOR) : framesPerRound;
        }

        boolean idle()
        {
            for (final NetReduceAllReduce op : ops)
            {
                if (!op.isDone())
                {
                    return false;
                }
            }
            return true;
        }

        int doWork()
        {
            if (idle() && !rested)
            {
                // one duty cycle with nothing in flight between calls, as a real ring has (its trainer works between
                // calls): the queue pairs' timers are then checked disarmed, which back-to-back calls never showed,
                // and a real ring's first idle turn threw the compiled timer check away (seen in an agent's log)
                rested = true;
            }
            else if (idle())
            {
                rested = false;
                inCall = true;
                if (marked)
                {
                    // every other call's packets from rank 0 marked CE: its successor's window shrinks, then grows
                    // back, and both ways of the window's law are in the profile
                    final int normal = config.trafficClass();
                    links[0].sendQp().trafficClass((begun & 1) == 0 ? normal & ~ECN_MASK | Ipv4Header.ECN_CE : normal);
                }
                begun++;
                for (int r = 0; r < ops.length; r++)
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
            for (final RcEndpoint endpoint : endpoints)
            {
                work += endpoint.doWork();
            }
            for (final NetReduceAllReduce op : ops)
            {
                work += op.poll();
            }
            if (inCall && idle())
            {
                inCall = false;
                calls++;
            }
            return work;
        }

        /**
         * Each rank sends its successor an ARP frame and an IPv4 frame that is not UDP, as a real interface carries
         * among the ring's: the endpoints count them and let them be.
         */
        void sendStrays()
        {
            for (int r = 0; r < ports.length; r++)
            {
                final long to = macs[(r + 1) % ports.length];
                stray.setMemory(0, STRAY_LENGTH, (byte)0);
                ethernet(to, macs[r], EthernetHeader.ETHER_TYPE_ARP);
                ports[r].send(stray, 0, STRAY_LENGTH);
                ethernet(to, macs[r], EthernetHeader.ETHER_TYPE_IPV4);
                Ipv4Header.write(stray, EthernetHeader.LENGTH, 0, STRAY_LENGTH - EthernetHeader.LENGTH, 0, 64,
                    PROTOCOL_TCP, 0, 0);
                ports[r].send(stray, 0, STRAY_LENGTH);
                // and IPv6 (ICMPv6: neighbour discovery, as a real interface carries): without one, the class the
                // IPv6 branch of RoceFrame.parse calls was not even loaded, and the first such frame of a real ring
                // deoptimized the receive path C2 had compiled (an "unloaded" trap, seen in a sidecar agent's log)
                stray.setMemory(0, STRAY_LENGTH, (byte)0);
                ethernet(to, macs[r], EthernetHeader.ETHER_TYPE_IPV6);
                Ipv6Header.write(stray, EthernetHeader.LENGTH, 0, 0,
                    STRAY_LENGTH - EthernetHeader.LENGTH - Ipv6Header.LENGTH, PROTOCOL_ICMPV6, 255, LINK_LOCAL,
                    LINK_LOCAL);
                ports[r].send(stray, 0, STRAY_LENGTH);
            }
        }

        private void ethernet(final long to, final long from, final int etherType)
        {
            EthernetHeader.dstMac(stray, 0, to);
            EthernetHeader.srcMac(stray, 0, from);
            EthernetHeader.etherType(stray, 0, etherType);
        }

        long frames()
        {
            long frames = 0;
            for (final RingLink link : links)
            {
                frames += link.sendQp().counters().packetsSent() + link.receiveQp().counters().packetsSent();
            }
            return frames;
        }

        long strays()
        {
            long strays = 0;
            for (final RcEndpoint endpoint : endpoints)
            {
                strays += endpoint.notRoce() + endpoint.malformed();
            }
            return strays;
        }

        long marked()
        {
            long marked = 0;
            for (final NetReduceAllReduce op : ops)
            {
                marked += op.congestion().markedResults();
            }
            return marked;
        }

        long resent()
        {
            long resent = 0;
            for (final RingLink link : links)
            {
                resent += link.sendQp().counters().retransmittedPackets();
            }
            return resent;
        }
    }
}
