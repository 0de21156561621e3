package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.port.PortException;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.L4Checksum;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.UdpHeader;
import io.netreduce.protocol.writer.RoceFrameWriter;
import org.HdrHistogram.Histogram;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.net.InetAddress;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Runs the whole per-packet path on made-up ring traffic before the appliance serves, so that the JIT has compiled
 * it when the first job's packets arrive: a private {@link DataplaneAgent} (its own tables, counters and a port in
 * memory, nothing shared with the agent that serves) sums {@value #RANKS} ranks' messages, round after round, each
 * round a ring of the next element type installed afresh, until it has taken the frames asked for.
 * <p>
 * Why: the JDK's ahead-of-time cache holds classes and profiles, not compiled code, so a fresh daemon ran its first
 * job's first call interpreted and then in C1 while C2 compiled the path on the same cores: at W = 8, 64 MiB, 1
 * Gbit/s on the 2-core bed the first call took 2.7-2.8 s against 2.1-2.3 s for the same ranks' first call on a daemon
 * that had served one job before (steady calls 1.2-1.3 s). A daemon runs for weeks; paying this once at start, before
 * it says it is ready, is cheaper for its users than paying it in the first job's first call.
 * <p>
 * Every frame is valid ring traffic (RDMA WRITE FIRST / MIDDLE / LAST WITH IMMEDIATE, the INA header, a correct
 * ICRC), the ranks in step as workers under their window are, so every message is aggregated and every result sent:
 * the report says whether that held (a warm-up that dropped frames warmed the drop path, and says so). The frames
 * are ECN-capable as workers send them, and every other round one rank's arrive marked CE, while the port reports
 * its whole round waiting as a backed-up ring does: the lane's own marks and the marked aggregators' branches are
 * then in the profile. Without them C2 compiled those branches as traps, and a fresh daemon's first call on a loaded
 * fabric threw its packet path back to the interpreter (seen in its deoptimization log); in those rounds every other
 * message of that rank is marked, so a marked result meets an unmarked one of the same flow, as under a switch's
 * marking. Each message is followed by its receiver's ACK to its sender and a TCP segment between the two hosts,
 * which the appliance passes on, as it passes a ring's responses and the hosts' other traffic; and every frame of
 * every other pair of rounds arrives with its L4 checksum left to finish (CHECKSUM_PARTIAL, as frames from a veth
 * neighbour do: the pass-through path then completes it).
 * <p>
 * Given the serving ports' settings ({@link #run(long, long, AfPacketConfiguration)}), the private agent's port is an
 * AF_PACKET port with those settings on the loopback interface, fed by a second one there ({@link LoopbackFeed}):
 * the port's own code (its receive ring, the frames' split, the transmit ring and the offload's batches) is then
 * compiled too, and every call site in the path sees the port class the serving agent's does. On a port in memory
 * they were not: a fresh daemon's first job's first call threw the port's read loop and the frame output's sends,
 * compiled for the memory port or for an empty ring, back to the interpreter (its deoptimization log, W = 8 on the
 * bed). Where the loopback interface cannot be used (down, no rights), the warm-up runs in memory and says why.
 * <p>
 * The daemon's warm-up then goes on while the JIT settles ({@link #settle}): methods that C1 compiled without a
 * profile while C2 was busy would otherwise be compiled again, twice, in the first job's first call.
 */
public final class PacketPathWarmUp
{
    /** Ranks of the made-up ring. */
    public static final int RANKS = 4;
    /** Packets per message: a first, middle and last packet each. */
    public static final int MSG_LEN = 4;
    /** Payload bytes per packet (the common 4 KiB MTU's). */
    public static final int PAYLOAD = 4096;
    /** Messages per rank in one round: within the window's MsgID range, so no message waits on another. */
    public static final int MESSAGES = 32;
    /** RDMA WRITE frames of one round: what the warm-up counts as its frames. */
    public static final int FRAMES_PER_ROUND = MESSAGES * MSG_LEN * RANKS;
    /**
     * Frames of one round the appliance passes on: per message its receiver's ACK to its sender and a TCP segment
     * between the two.
     */
    public static final int PASS_ON_PER_ROUND = 2 * MESSAGES * RANKS;
    /** Frames the port takes in one round. */
    static final int ROUND_FRAMES = FRAMES_PER_ROUND + PASS_ON_PER_ROUND;
    /** Frames fed per message of one rank: its packets, the ACK and the TCP segment. */
    private static final int FRAMES_PER_MESSAGE = MSG_LEN + 2;
    private static final int TCP_PAYLOAD = 64;
    /** Where a warm-up ran when it ran in memory. */
    public static final String IN_MEMORY = "memory";

    private static final int WINDOW = 8;
    /** IP traffic class of the frames: ECT(0), as workers send them; and CE, as a congested hop leaves them. */
    private static final int ECT0 = 0x02;
    private static final int CE = 0x03;
    /**
     * The port's backlog (of a round's frames) from which the lane marks: the first tenth of each round's frames
     * meet a backed-up port, the rest do not, so both ways of the lane's marking are in the profile.
     */
    private static final double BACKLOG_MARK = 0.9;
    private static final int RING_ID = 1;
    private static final ElementType[] TYPES = ElementType.values();

    /**
     * What a warm-up did.
     *
     * @param port         where its frames went: {@code lo}, or {@value #IN_MEMORY} (with the loopback
     *                     interface's refusal in brackets where one was asked for).
     * @param frames       RDMA WRITE frames fed to the path.
     * @param aggregations aggregations completed (one per packet position of a message).
     * @param expected     aggregations the frames hold.
     * @param results      result frames the path sent.
     * @param passOn       frames fed that the path is to pass on (the ACKs and TCP segments).
     * @param forwarded    frames the path passed on.
     * @param completed    frames passed on whose L4 checksum the path completed (those that arrived with it left
     *                     to finish).
     * @param drops        frames dropped, lost on the way to the path or not sent (none expected).
     * @param marked       results sent marked CE (the marked rounds' and the backed-up port's).
     * @param passes       passes run while the JIT settled, after the frames asked for (their frames counted in
     *                     the others).
     * @param nanos        time taken.
     */
    public record Report(String port, long frames, long aggregations, long expected, long results, long passOn,
        long forwarded, long completed, long drops, long marked, int passes, long nanos)
    {
        /**
         * @return whether every frame was summed, every result sent and every other frame passed on, as real
         *         traffic would be.
         */
        public boolean clean()
        {
            return aggregations == expected && drops == 0 && results == frames && forwarded == passOn;
        }
    }

    private PacketPathWarmUp()
    {
    }

    /**
     * A warm-up stops after this long even if it has not taken its frames: on a machine so slow that 65,536 frames
     * take longer (a VM under emulation), the JIT would not have finished either, and the daemon's start must not
     * wait for it.
     */
    public static final long DEFAULT_MAX_NANOS = 5_000_000_000L;

    /** Most passes while the JIT settles, for the daemon's warm-up: the 2-core bed's fresh daemon takes 2-4. */
    public static final int DEFAULT_SETTLE_PASSES = 8;
    /** Rounds of a pass while the JIT settles: 8,192 ring frames, past C2's threshold for a per-frame method. */
    static final int SETTLE_ROUNDS = 32;
    /** The compilers count as quiet after this long without CPU. */
    private static final long QUIET_NANOS = 50_000_000L;
    /** A pass that cost the compilers at most this many clock ticks (30 ms) leaves the JIT settled. */
    private static final long SETTLED_TICKS = 3;

    /**
     * {@link #run(long, long)} within {@link #DEFAULT_MAX_NANOS}.
     */
    public static Report run(final long frames)
    {
        return run(frames, DEFAULT_MAX_NANOS);
    }

    /**
     * {@link #run(long, long, AfPacketConfiguration)} on a port in memory.
     */
    public static Report run(final long frames, final long maxNanos)
    {
        return run(frames, maxNanos, null);
    }

    /**
     * Feed at least {@code frames} frames (whole rounds of {@link #FRAMES_PER_ROUND}) through a private agent on
     * the calling thread, or as many rounds as start within {@code maxNanos}.
     *
     * @param portSettings the serving ports' settings, for the private agent's port on the loopback interface;
     *                     null, or where that port cannot be opened: a port in memory.
     * @return what it did; no frames when {@code frames <= 0}.
     */
    public static Report run(final long frames, final long maxNanos, final AfPacketConfiguration portSettings)
    {
        return run(frames, maxNanos, portSettings, 0);
    }

    /**
     * {@link #run(long, long, AfPacketConfiguration)}, and then up to {@code settlePasses} passes of
     * {@link #SETTLE_ROUNDS} rounds while the JIT settles (see {@link #settle}), all within {@code maxNanos}: the
     * daemon's warm-up ({@link #DEFAULT_SETTLE_PASSES}).
     */
    public static Report run(final long frames, final long maxNanos, final AfPacketConfiguration portSettings,
        final int settlePasses)
    {
        final long startNs = System.nanoTime();
        if (frames <= 0)
        {
            return new Report(IN_MEMORY, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        }
        final RoundFrames round = new RoundFrames();
        LoopbackFeed feed = null;
        String where = IN_MEMORY;
        if (portSettings != null)
        {
            try
            {
                feed = LoopbackFeed.open(portSettings, round.maxFrameLength());
                where = LoopbackFeed.INTERFACE;
            }
            catch (final PortException ex)
            {
                where = IN_MEMORY + " (" + LoopbackFeed.INTERFACE + ": " + ex.getMessage() + ")";
            }
        }
        final PacketPort port = feed != null ? feed.port() : round.port;
        final DataplaneCounters counters = new DataplaneCounters();
        final DataplaneAgent agent;
        try
        {
            agent = new DataplaneAgent(new DataplaneContext()
                .ports(List.of(port))
                .ecnBacklog(BACKLOG_MARK)
                .counters(counters)
                .memoryBudget(64L << 20)
                .cltEntries(64));
        }
        catch (final RuntimeException ex)
        {
            if (feed != null)
            {
                feed.close();
            }
            throw ex;
        }
        final Rounds rounds = new Rounds(agent, round, feed);
        int passes = 0;
        try
        {
            while (rounds.fed < frames && (rounds.count == 0 || System.nanoTime() - startNs < maxNanos))
            {
                rounds.next();
            }
            passes = settlePasses > 0 ? settle(rounds, settlePasses, startNs + maxNanos) : 0;
        }
        finally
        {
            agent.onClose();
            if (feed != null)
            {
                feed.close();
            }
        }
        final long fed = rounds.fed;
        final long drops = counters.drops() + counters.get(DataplaneCounter.TX_FULL) + rounds.lost;
        return new Report(where, fed, counters.get(DataplaneCounter.AGGREGATIONS_COMPLETED), rounds.expected,
            counters.get(DataplaneCounter.RESULT_PACKETS), fed / FRAMES_PER_ROUND * PASS_ON_PER_ROUND,
            counters.get(DataplaneCounter.PASS_THROUGH), counters.get(DataplaneCounter.PASS_THROUGH_CHECKSUM_COMPLETED),
            drops, counters.get(DataplaneCounter.ECN_CE_SENT), passes, System.nanoTime() - startNs);
    }

    /**
     * The rounds after the warm-up's frames, until the JIT settles. While the warm-up runs, C2's queue is long, and
     * HotSpot's tiered policy then compiles methods with C1 at tier 2 (no profile) instead of tier 3 (full profile),
     * to be compiled again at tier 3 once the queue is short, at their next calls. The next calls of a packet method
     * are the first job's: in a compile log of a fresh daemon's first 64 MiB call at W = 8 (2026-11-27), 51 methods
     * went from tier 2 to tier 3 and 40 on to C2 in that call. So once the compilers have gone quiet, a pass of
     * {@link #SETTLE_ROUNDS} rounds moves those methods on while there is no job to slow, and passes follow until one
     * leaves the compilers nearly idle, or {@code maxPasses} or the deadline.
     *
     * @return passes run.
     */
    private static int settle(final Rounds rounds, final int maxPasses, final long deadlineNs)
    {
        int passes = 0;
        // the compilers' time when they were last seen quiet: the end of one pass's wait is the next one's start
        long quietTicks = CompilerActivity.awaitQuiet(QUIET_NANOS, deadlineNs);
        while (passes < maxPasses && quietTicks >= 0)
        {
            for (int i = 0; i < SETTLE_ROUNDS; i++)
            {
                rounds.next();
            }
            passes++;
            final long afterTicks = CompilerActivity.awaitQuiet(QUIET_NANOS, deadlineNs);
            if (afterTicks < 0 || afterTicks - quietTicks <= SETTLED_TICKS)
            {
                break;
            }
            quietTicks = afterTicks;
        }
        return passes;
    }

    /**
     * Rounds fed to the private agent, and what they came to.
     */
    private static final class Rounds
    {
        private final DataplaneAgent agent;
        private final RoundFrames round;
        private final LoopbackFeed feed;
        private Histogram intervals;
        int count;
        long fed;
        long expected;
        long lost;

        Rounds(final DataplaneAgent agent, final RoundFrames round, final LoopbackFeed feed)
        {
            this.agent = agent;
            this.round = round;
            this.feed = feed;
        }

        /**
         * One round: a ring of the next element type installed, its frames fed, the ring removed.
         */
        void next()
        {
            final RingDefinition ring = ring(TYPES[count % TYPES.length]);
            round.load(ring, (count & 1) == 1, (count & 2) == 2);
            apply(agent, agent.proxy().installRing(ring));
            if (feed != null)
            {
                lost += feed.feed(round, ROUND_FRAMES, agent);
            }
            else
            {
                while (round.port.remaining() > 0)
                {
                    agent.doWork();
                }
            }
            agent.doWork();
            apply(agent, agent.proxy().removeRing(RING_ID));
            // As a reader of the metrics does: each round takes the latency recorder's interval histogram, so that
            // a new longest latency (a real job's are longer) is no branch the profile has never taken, and the
            // recorder's writers run in both of its phases (one flip per read), as they do in service.
            intervals = agent.handle().latency().getIntervalHistogram(intervals);
            count++;
            fed += FRAMES_PER_ROUND;
            expected += (long)MESSAGES * MSG_LEN;
        }
    }

    private static void apply(final DataplaneAgent agent, final CompletableFuture<?> reply)
    {
        while (!reply.isDone())
        {
            agent.doWork();
        }
        reply.join();
    }

    private static RingDefinition ring(final ElementType type)
    {
        final List<RingMember> members = new ArrayList<>(RANKS);
        for (int r = 0; r < RANKS; r++)
        {
            members.add(new RingMember(r, InetAddress.ofLiteral("192.0.2." + (r + 1)))); // TEST-NET-1: no real host
        }
        return new RingDefinition(RING_ID, "warm-up", type, WINDOW, MSG_LEN, PAYLOAD, members);
    }

    /**
     * Builds a round's frames into a {@link ReplayPort}: every rank's messages, rank r writing to rank r + 1 from its
     * own first PSN, interleaved packet by packet across the ranks as workers in step under their window send them,
     * and after each message its receivers' ACKs and a TCP segment from each rank to its successor. Where a frame's L4
     * checksum starts, for a sender that leaves it to finish, is kept beside it.
     */
    static final class RoundFrames
    {
        private static final int L3 = EthernetHeader.LENGTH;
        private static final int L4 = L3 + Ipv4Header.MIN_LENGTH;
        private static final int TCP_CHECKSUM_FIELD = 16;
        private static final int TCP_HEADER = 20;

        private final RoceFrameWriter writer = new RoceFrameWriter();
        private final UnsafeBuffer message = new UnsafeBuffer(new byte[MSG_LEN * PAYLOAD]);
        final ReplayPort port;
        private final int[] checksumField = new int[ROUND_FRAMES];
        private boolean checksumPartial;

        RoundFrames()
        {
            port = new ReplayPort(ROUND_FRAMES, maxFrameLength());
        }

        int maxFrameLength()
        {
            return writer.frameLength(Opcode.RDMA_WRITE_FIRST, PAYLOAD);
        }

        /**
         * @return where the round's frames' L4 checksum starts when the sender leaves it to finish, else -1.
         */
        int checksumStart()
        {
            return checksumPartial ? L4 : -1;
        }

        /**
         * @return the L4 checksum field's offset from {@link #checksumStart}.
         */
        int checksumField(final int index)
        {
            return checksumField[index];
        }

        /**
         * @param marked          whether every other message of rank 0 arrives marked CE.
         * @param checksumPartial whether every frame arrives with its L4 checksum left to finish.
         */
        void load(final RingDefinition ring, final boolean marked, final boolean checksumPartial)
        {
            this.checksumPartial = checksumPartial;
            final int flags = checksumPartial ? FrameHandler.FLAG_CHECKSUM_NOT_READY : 0;
            for (int rank = 0; rank < RANKS; rank++)
            {
                final int successor = (rank + 1) % RANKS;
                final int firstPsn = 1000 * (rank + 1);
                for (int m = 0; m < MESSAGES; m++)
                {
                    writer.ipv4(address(rank), address(successor)).macs(mac(rank), mac(successor))
                        .destQp(0x100 + successor).udpSrcPort(0xC000 + rank)
                        .trafficClass(marked && rank == 0 && (m & 1) == 0 ? CE : ECT0, 0);
                    InaHeader.write(message, 0, ring.inetTag(), RING_ID, m & 0xFF, MSG_LEN, rank);
                    for (int i = InaHeader.LENGTH; i < message.capacity(); i++)
                    {
                        // small finite values in every element type: no byte above 0x3F
                        message.putByte(i, (byte)((i * 31 + m * 7 + rank) & 0x3F));
                    }
                    writer.reth(0x7F00_0000_0000L + (long)m * message.capacity(), 0x1234, message.capacity())
                        .immediate(m & 0xFF);
                    final int first = m * FRAMES_PER_MESSAGE * RANKS;
                    for (int p = 0; p < MSG_LEN; p++)
                    {
                        final int opcode = p == 0 ? Opcode.RDMA_WRITE_FIRST : p == MSG_LEN - 1 ?
                            Opcode.RDMA_WRITE_LAST_WITH_IMMEDIATE : Opcode.RDMA_WRITE_MIDDLE;
                        final int index = first + p * RANKS + rank;
                        port.length(index, writer.write(port.frames(), port.offset(index), opcode,
                            firstPsn + m * MSG_LEN + p, p == MSG_LEN - 1, message, p * PAYLOAD, PAYLOAD));
                        udpChecksumPartial(index, flags);
                    }
                    // the successor's ACK of the whole message, to this rank's own queue pair
                    writer.ipv4(address(successor), address(rank)).macs(mac(successor), mac(rank))
                        .destQp(0x200 + rank).udpSrcPort(0xC000 + successor).trafficClass(ECT0, 0)
                        .aeth(0, m + 1);
                    final int ack = first + MSG_LEN * RANKS + rank;
                    port.length(ack, writer.write(port.frames(), port.offset(ack), Opcode.ACKNOWLEDGE,
                        firstPsn + m * MSG_LEN + MSG_LEN - 1, false, message, 0, 0));
                    udpChecksumPartial(ack, flags);
                    tcpSegment(first + (MSG_LEN + 1) * RANKS + rank, rank, successor, m, flags);
                }
            }
            port.rewind(ROUND_FRAMES);
        }

        private void udpChecksumPartial(final int index, final int flags)
        {
            checksumField[index] = UdpHeader.CHECKSUM_OFFSET;
            port.flags(index, flags);
            if (checksumPartial)
            {
                L4Checksum.writeUdpPartial(port.frames(), port.offset(index) + L3, port.offset(index) + L4);
            }
        }

        /**
         * A TCP segment from {@code rank} to {@code successor}, as the hosts' own traffic (a framework's control
         * connection) crosses the appliance beside the ring's.
         */
        private void tcpSegment(final int index, final int rank, final int successor, final int m, final int flags)
        {
            final MutableDirectBuffer frames = port.frames();
            final int at = port.offset(index);
            final int length = L4 + TCP_HEADER + TCP_PAYLOAD;
            EthernetHeader.dstMac(frames, at, mac(successor));
            EthernetHeader.srcMac(frames, at, mac(rank));
            EthernetHeader.etherType(frames, at, EthernetHeader.ETHER_TYPE_IPV4);
            Ipv4Header.write(frames, at + L3, 0, length - L3, m, 64, L4Checksum.PROTOCOL_TCP, address(rank),
                address(successor));
            frames.setMemory(at + L4, TCP_HEADER + TCP_PAYLOAD, (byte)0);
            frames.putShort(at + L4, (short)(40000 + rank), ByteOrder.BIG_ENDIAN);
            frames.putShort(at + L4 + 2, (short)29500, ByteOrder.BIG_ENDIAN);
            frames.putInt(at + L4 + 4, m * TCP_PAYLOAD, ByteOrder.BIG_ENDIAN);
            frames.putByte(at + L4 + 12, (byte)(TCP_HEADER / 4 << 4));
            frames.putByte(at + L4 + 13, (byte)0x18); // PSH, ACK
            frames.putShort(at + L4 + 14, (short)0xFFFF, ByteOrder.BIG_ENDIAN);
            port.length(index, length);
            port.flags(index, flags);
            checksumField[index] = TCP_CHECKSUM_FIELD;
        }

        private static int address(final int rank)
        {
            return (192 << 24) | (2 << 8) | (rank + 1);
        }

        private static long mac(final int rank)
        {
            return 0x02_00_00_00_00_00L | rank;
        }
    }
}
