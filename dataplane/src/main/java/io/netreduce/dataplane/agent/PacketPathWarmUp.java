package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.writer.RoceFrameWriter;
import org.agrona.concurrent.UnsafeBuffer;

import java.net.InetAddress;
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
 * fabric threw its packet path back to the interpreter (seen in its deoptimization log).
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
    /** Frames of one round. */
    public static final int FRAMES_PER_ROUND = MESSAGES * MSG_LEN * RANKS;

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
     * @param frames       frames fed to the path.
     * @param aggregations aggregations completed (one per packet position of a message).
     * @param expected     aggregations the frames hold.
     * @param results      result frames the path sent.
     * @param drops        frames dropped or passed through (none expected).
     * @param marked       results sent marked CE (the marked rounds' and the backed-up port's).
     * @param nanos        time taken.
     */
    public record Report(long frames, long aggregations, long expected, long results, long drops, long marked,
        long nanos)
    {
        /**
         * @return whether every frame was summed and every result sent, as real ring traffic would be.
         */
        public boolean clean()
        {
            return aggregations == expected && drops == 0 && results == frames;
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

    /**
     * {@link #run(long, long)} within {@link #DEFAULT_MAX_NANOS}.
     */
    public static Report run(final long frames)
    {
        return run(frames, DEFAULT_MAX_NANOS);
    }

    /**
     * Feed at least {@code frames} frames (whole rounds of {@link #FRAMES_PER_ROUND}) through a private agent on
     * the calling thread, or as many rounds as start within {@code maxNanos}.
     *
     * @return what it did; no frames when {@code frames <= 0}.
     */
    public static Report run(final long frames, final long maxNanos)
    {
        final long startNs = System.nanoTime();
        if (frames <= 0)
        {
            return new Report(0, 0, 0, 0, 0, 0, 0);
        }
        final RoundFrames round = new RoundFrames();
        final ReplayPort port = round.port;
        final DataplaneCounters counters = new DataplaneCounters();
        final DataplaneAgent agent = new DataplaneAgent(new DataplaneContext()
            .ports(List.of(port))
            .ecnBacklog(BACKLOG_MARK)
            .counters(counters)
            .memoryBudget(64L << 20)
            .cltEntries(64));
        long fed = 0;
        long expected = 0;
        try
        {
            for (int rounds = 0; fed < frames && (rounds == 0 || System.nanoTime() - startNs < maxNanos); rounds++)
            {
                final RingDefinition ring = ring(TYPES[rounds % TYPES.length]);
                round.load(ring, (rounds & 1) == 1);
                apply(agent, agent.proxy().installRing(ring));
                while (port.remaining() > 0)
                {
                    agent.doWork();
                }
                agent.doWork();
                apply(agent, agent.proxy().removeRing(RING_ID));
                fed += FRAMES_PER_ROUND;
                expected += (long)MESSAGES * MSG_LEN;
            }
        }
        finally
        {
            agent.onClose();
        }
        final long drops = counters.drops() + counters.get(DataplaneCounter.PASS_THROUGH) +
            counters.get(DataplaneCounter.TX_FULL);
        return new Report(fed, counters.get(DataplaneCounter.AGGREGATIONS_COMPLETED), expected, port.sent(), drops,
            counters.get(DataplaneCounter.ECN_CE_SENT), System.nanoTime() - startNs);
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
     * own first PSN, interleaved packet by packet across the ranks as workers in step under their window send them.
     */
    private static final class RoundFrames
    {
        private final RoceFrameWriter writer = new RoceFrameWriter();
        private final UnsafeBuffer message = new UnsafeBuffer(new byte[MSG_LEN * PAYLOAD]);
        private final ReplayPort port;

        RoundFrames()
        {
            port = new ReplayPort(FRAMES_PER_ROUND, writer.frameLength(Opcode.RDMA_WRITE_FIRST, PAYLOAD));
        }

        /**
         * @param marked whether rank 0's frames arrive marked CE.
         */
        void load(final RingDefinition ring, final boolean marked)
        {
            for (int rank = 0; rank < RANKS; rank++)
            {
                final int successor = (rank + 1) % RANKS;
                writer.ipv4(address(rank), address(successor)).macs(mac(rank), mac(successor))
                    .destQp(0x100 + successor).udpSrcPort(0xC000 + rank)
                    .trafficClass(marked && rank == 0 ? CE : ECT0, 0);
                final int firstPsn = 1000 * (rank + 1);
                for (int m = 0; m < MESSAGES; m++)
                {
                    InaHeader.write(message, 0, ring.inetTag(), RING_ID, m & 0xFF, MSG_LEN, rank);
                    for (int i = InaHeader.LENGTH; i < message.capacity(); i++)
                    {
                        // small finite values in every element type: no byte above 0x3F
                        message.putByte(i, (byte)((i * 31 + m * 7 + rank) & 0x3F));
                    }
                    writer.reth(0x7F00_0000_0000L + (long)m * message.capacity(), 0x1234, message.capacity())
                        .immediate(m & 0xFF);
                    for (int p = 0; p < MSG_LEN; p++)
                    {
                        final int opcode = p == 0 ? Opcode.RDMA_WRITE_FIRST : p == MSG_LEN - 1 ?
                            Opcode.RDMA_WRITE_LAST_WITH_IMMEDIATE : Opcode.RDMA_WRITE_MIDDLE;
                        final int index = (m * MSG_LEN + p) * RANKS + rank;
                        port.length(index, writer.write(port.frames(), port.offset(index), opcode,
                            firstPsn + m * MSG_LEN + p, p == MSG_LEN - 1, message, p * PAYLOAD, PAYLOAD));
                    }
                }
            }
            port.rewind(FRAMES_PER_ROUND);
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
