package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.HierarchySimulation;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.protocol.support.ScapyIcrc;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.Ecn;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * ECN through aggregation (PANAMA §4.2): the appliance ORs the ECN fields of a position's contributions and every
 * packet it sends for the position carries CE when one of them did, so a mark on any rank's path reaches every rank
 * with its result. Unmarked positions keep each rank's own codepoint (ECT(0) or ECT(1) as it sent it). The ICRC
 * masks the field: marked results verify with the ICRC the appliance combined, and with scapy's.
 */
class EcnAggregationTest
{
    private static final int RANKS = 3;
    private static final int MSG_LEN = 3;
    private static final List<byte[]> SCAPY_SAMPLE = new ArrayList<>();

    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();

    /** What rank r sends with: ECT(0), but rank 2 ECT(1) (both must come back as sent when unmarked). */
    private static int codepointOf(final int rank)
    {
        return rank == 2 ? Ecn.ECT_1 : Ecn.ECT_0;
    }

    private static byte[] withEcn(final byte[] frame, final int codepoint)
    {
        Ecn.set(new UnsafeBuffer(frame), 14, codepoint);
        return frame;
    }

    /**
     * The ring's frames of message {@code m}, rank by rank position by position; {@code marked} says which
     * (rank, position) carries CE.
     */
    private static List<byte[]> sendMessage(
        final DataplaneHarness harness, final RingWorker[] workers, final byte[][] gradients, final int m,
        final int markedRank, final int markedPosition)
    {
        final List<List<byte[]>> frames = new ArrayList<>();
        for (int r = 0; r < workers.length; r++)
        {
            frames.add(workers[r].message(m, gradients[r]));
        }
        return send(harness, frames, markedRank, markedPosition);
    }

    /**
     * Send copies of the frames (rank by rank, position by position), {@code (markedRank, markedPosition)} marked.
     */
    private static List<byte[]> send(
        final DataplaneHarness harness, final List<List<byte[]>> frames, final int markedRank,
        final int markedPosition)
    {
        final List<byte[]> out = new ArrayList<>();
        for (int p = 0; p < MSG_LEN; p++)
        {
            for (int r = 0; r < frames.size(); r++)
            {
                final int codepoint = r == markedRank && p == markedPosition ? Ecn.CE : codepointOf(r);
                out.addAll(harness.process(withEcn(frames.get(r).get(p).clone(), codepoint)));
            }
        }
        return out;
    }

    private int rankOf(final byte[] result)
    {
        assertThat(frame.wrap(new UnsafeBuffer(result), 0, result.length)).isEqualTo(RoceFrame.OK);
        return (frame.destQp() - RingWorker.defaultReceiveQp(0) + RANKS - 1) % RANKS;
    }

    private int positionOf(final RingWorker[] workers, final byte[] result, final int m)
    {
        final int rank = rankOf(result);
        for (int p = 0; p < MSG_LEN; p++)
        {
            if (workers[rank].psn(m, p) == frame.psn())
            {
                return p;
            }
        }
        throw new AssertionError("PSN " + frame.psn() + " is no position of message " + m + " of rank " + rank);
    }

    private void assertValid(final byte[] result)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(result);
        assertThat(frame.wrap(buffer, 0, result.length)).isEqualTo(RoceFrame.OK);
        assertThat(icrc.verify(frame)).as("ICRC of a result").isTrue();
        if (frame.ipVersion() == 4)
        {
            assertThat(Ipv4Header.computeChecksum(buffer, frame.l3Offset())).as("IPv4 checksum").isZero();
        }
    }

    @ParameterizedTest(name = "ipv6={0}")
    @ValueSource(booleans = { false, true })
    void shouldMarkEveryResultOfAPositionOneContributionOfWhichWasMarked(final boolean ipv6)
    {
        final RingDefinition config = Rings.ring(3, RANKS, ElementType.FP32, 2, MSG_LEN, 256, ipv6);
        final Random random = new Random(42);
        final RingWorker[] workers = new RingWorker[RANKS];
        final byte[][] gradients = new byte[RANKS][];
        for (int r = 0; r < RANKS; r++)
        {
            workers[r] = RingWorker.of(config, r, random.nextInt(1 << 24));
            gradients[r] = Gradients.random(ElementType.FP32, workers[r].gradientBytes(), random);
        }
        try (DataplaneHarness marked = new DataplaneHarness(); DataplaneHarness plain = new DataplaneHarness())
        {
            marked.install(config);
            plain.install(config);
            final List<List<byte[]>> frames = new ArrayList<>();
            for (int r = 0; r < RANKS; r++)
            {
                frames.add(workers[r].message(0, gradients[r]));
            }
            final List<byte[]> results = send(marked, frames, 1, 1);
            final List<byte[]> reference = send(plain, frames, -1, -1);
            assertThat(results).hasSize(RANKS * MSG_LEN);
            assertThat(reference).hasSize(RANKS * MSG_LEN);
            assertThat(marked.counter(DataplaneCounter.ECN_CE_RECEIVED)).isEqualTo(1);
            assertThat(marked.counter(DataplaneCounter.ECN_CE_SENT)).as("the position's results").isEqualTo(RANKS);
            assertThat(plain.counter(DataplaneCounter.ECN_CE_SENT)).isZero();
            for (int i = 0; i < results.size(); i++)
            {
                final byte[] result = results.get(i);
                assertValid(result);
                final int rank = rankOf(result);
                final int position = positionOf(workers, result, 0);
                final int ecn = Ecn.of(new UnsafeBuffer(result), 14);
                assertThat(ecn).as("rank %d position %d", rank, position)
                    .isEqualTo(position == 1 ? Ecn.CE : codepointOf(rank));
                // Apart from the ECN field (and the IPv4 checksum that covers it) the result is the unmarked one.
                assertThat(withEcn(result.clone(), Ecn.NOT_ECT))
                    .isEqualTo(withEcn(reference.get(i).clone(), Ecn.NOT_ECT));
                if (!ipv6)
                {
                    // scapy computes ICRCs over IPv4 only
                    synchronized (SCAPY_SAMPLE)
                    {
                        SCAPY_SAMPLE.add(result);
                    }
                }
            }
        }
    }

    @Test
    void shouldAnswerAMarkedRetransmissionWithAMarkedResultAndForgetTheMarkWhenTheAggregatorIsBoundAgain()
    {
        final int window = 2;
        final RingDefinition config = Rings.ring(4, RANKS, ElementType.INT32, window, MSG_LEN, 128);
        final Random random = new Random(7);
        final RingWorker[] workers = new RingWorker[RANKS];
        for (int r = 0; r < RANKS; r++)
        {
            workers[r] = RingWorker.of(config, r, random.nextInt(1 << 24));
        }
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            final int messages = 2 * window + 2;
            final byte[][][] gradients = new byte[messages][RANKS][];
            for (int m = 0; m < messages; m++)
            {
                for (int r = 0; r < RANKS; r++)
                {
                    gradients[m][r] = Gradients.random(ElementType.INT32, workers[r].gradientBytes(), random);
                }
            }
            // Message 0: nothing marked. Rank 0 resends its position 2 marked: the answer (its own only) is marked.
            for (final byte[] result : sendMessage(harness, workers, gradients[0], 0, -1, -1))
            {
                assertThat(Ecn.of(new UnsafeBuffer(result), 14)).isNotEqualTo(Ecn.CE);
            }
            final byte[] resend = withEcn(workers[0].message(0, gradients[0][0]).get(2), Ecn.CE);
            final List<byte[]> answer = harness.process(resend);
            assertThat(answer).hasSize(1);
            assertThat(rankOf(answer.getFirst())).isZero();
            assertThat(Ecn.of(new UnsafeBuffer(answer.getFirst()), 14)).isEqualTo(Ecn.CE);
            assertValid(answer.getFirst());
            assertThat(harness.counter(DataplaneCounter.ECN_CE_RECEIVED)).isEqualTo(1);
            assertThat(harness.counter(DataplaneCounter.ECN_CE_SENT)).isEqualTo(1);

            // Message 1 marked at rank 2 position 0; messages 2N and 2N + 1 reuse the aggregators of messages 0 and 1
            // and are unmarked.
            for (int m = 1; m < messages; m++)
            {
                final List<byte[]> results = sendMessage(harness, workers, gradients[m], m, m == 1 ? 2 : -1, 0);
                assertThat(results).hasSize(RANKS * MSG_LEN);
                for (final byte[] result : results)
                {
                    final int position = positionOf(workers, result, m);
                    assertThat(Ecn.of(new UnsafeBuffer(result), 14) == Ecn.CE)
                        .as("message %d position %d", m, position).isEqualTo(m == 1 && position == 0);
                    assertValid(result);
                }
            }
        }
    }

    /**
     * Harness ports hold 909 frames of the largest length; 3.5 / 909 of that is a threshold of 4 frames.
     */
    private static final double FOUR_FRAMES = 3.5 / 909;

    /**
     * The appliance's own marks: a batch read while the receive queue holds the threshold counts its ECN-capable
     * packets as marked, and each of their positions' results goes out CE, valid and otherwise unchanged.
     */
    @Test
    void shouldMarkEveryResultOfABatchReadWhileTheReceiveQueueHeldTheThreshold()
    {
        final RingDefinition config = Rings.ring(6, RANKS, ElementType.FP32, 2, MSG_LEN, 256);
        final Random random = new Random(11);
        final RingWorker[] workers = new RingWorker[RANKS];
        final byte[][] gradients = new byte[RANKS][];
        for (int r = 0; r < RANKS; r++)
        {
            workers[r] = RingWorker.of(config, r, random.nextInt(1 << 24));
            gradients[r] = Gradients.random(ElementType.FP32, workers[r].gradientBytes(), random);
        }
        try (DataplaneHarness queued = new DataplaneHarness(context -> context.ecnBacklog(FOUR_FRAMES));
            DataplaneHarness oneByOne = new DataplaneHarness(context -> context.ecnBacklog(FOUR_FRAMES)))
        {
            assertThat(queued.port(0).receiveCapacity()).isEqualTo(909);
            queued.install(config);
            oneByOne.install(config);
            final List<List<byte[]>> frames = new ArrayList<>();
            for (int r = 0; r < RANKS; r++)
            {
                frames.add(workers[r].message(0, gradients[r]));
            }
            // the whole message waits in the queue (9 frames) when the batch begins
            for (int p = 0; p < MSG_LEN; p++)
            {
                for (int r = 0; r < RANKS; r++)
                {
                    assertThat(queued.port(0).inject(withEcn(frames.get(r).get(p).clone(), codepointOf(r)))).isTrue();
                }
            }
            final List<byte[]> marked = queued.runAndDrain(0);
            // the same frames one at a time: the queue never holds more than one
            final List<byte[]> plain = send(oneByOne, frames, -1, -1);

            assertThat(marked).hasSize(RANKS * MSG_LEN);
            assertThat(queued.counter(DataplaneCounter.ECN_CE_QUEUE)).isEqualTo(RANKS * MSG_LEN);
            assertThat(queued.counter(DataplaneCounter.ECN_CE_RECEIVED)).isZero();
            assertThat(queued.counter(DataplaneCounter.ECN_CE_SENT)).isEqualTo(RANKS * MSG_LEN);
            assertThat(oneByOne.counter(DataplaneCounter.ECN_CE_QUEUE)).isZero();
            assertThat(oneByOne.counter(DataplaneCounter.ECN_CE_SENT)).isZero();
            for (int i = 0; i < marked.size(); i++)
            {
                final byte[] result = marked.get(i);
                assertValid(result);
                assertThat(Ecn.of(new UnsafeBuffer(result), 14)).isEqualTo(Ecn.CE);
                assertThat(Ecn.of(new UnsafeBuffer(plain.get(i)), 14)).isEqualTo(codepointOf(rankOf(plain.get(i))));
                assertThat(withEcn(result.clone(), Ecn.NOT_ECT)).isEqualTo(withEcn(plain.get(i).clone(), Ecn.NOT_ECT));
            }
        }
    }

    /**
     * RFC 3168 §5: a packet that is not ECN-capable is never marked; and marking off (0) marks nothing.
     */
    @ParameterizedTest(name = "notEct={0}")
    @ValueSource(booleans = { false, true })
    void shouldNotMarkNotEctPacketsNorMarkWhenQueueMarkingIsOff(final boolean notEct)
    {
        final RingDefinition config = Rings.ring(7, RANKS, ElementType.FP32, 2, MSG_LEN, 256);
        final Random random = new Random(12);
        final double threshold = notEct ? FOUR_FRAMES : 0;
        try (DataplaneHarness harness = new DataplaneHarness(context -> context.ecnBacklog(threshold)))
        {
            harness.install(config);
            for (int r = 0; r < RANKS; r++)
            {
                final RingWorker worker = RingWorker.of(config, r, random.nextInt(1 << 24));
                for (final byte[] frame : worker.message(0,
                    Gradients.random(ElementType.FP32, worker.gradientBytes(), random)))
                {
                    harness.port(0).inject(withEcn(frame, notEct ? Ecn.NOT_ECT : Ecn.ECT_0));
                }
            }
            final List<byte[]> results = harness.runAndDrain(0);
            assertThat(results).hasSize(RANKS * MSG_LEN);
            for (final byte[] result : results)
            {
                assertThat(Ecn.of(new UnsafeBuffer(result), 14)).isEqualTo(notEct ? Ecn.NOT_ECT : Ecn.ECT_0);
            }
            assertThat(harness.counter(DataplaneCounter.ECN_CE_QUEUE)).isZero();
        }
    }

    /**
     * Multi-rack: a mark on a rank's packet reaches every rank of every rack (up in the leaf's partial, down in the
     * spine's result); a mark on a partial going up reaches every rank; a mark on the spine's result going down to
     * one leaf reaches that rack's ranks only.
     */
    @Test
    void shouldCarryTheMarkUpAndDownAHierarchy()
    {
        final RingDefinition config = Rings.ring(5, 4, ElementType.FP32, 2, MSG_LEN, 256);
        final int messages = 6;
        final HierarchySimulation run = HierarchySimulation.lossless(config, List.of(1, 3), messages, 13);
        final int[] ranksOfAddress = new int[256];
        for (int r = 0; r < 4; r++)
        {
            ranksOfAddress[config.member(r).address().getAddress()[3] & 0xFF] = r;
        }
        final RoceFrame hopFrame = new RoceFrame();
        run.onHop((hop, target, bytes) ->
        {
            final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
            if (hopFrame.wrap(buffer, 0, bytes.length) != RoceFrame.OK || hopFrame.payloadLength() == 0)
            {
                return;
            }
            final int source = ranksOfAddress[buffer.getByte(hopFrame.l3Offset() + Ipv4Header.SRC_OFFSET + 3) & 0xFF];
            final int psn = hopFrame.psn();
            final boolean mark = switch (hop)
            {
                // rank 0 (rack 0) at message 1 position 1
                case HierarchySimulation.HOP_WORKER_TO_LEAF -> source == 0 && psn == run.worker(0).psn(1, 1);
                // rack 1's partial (connection 3 -> 0) at message 2 position 0
                case HierarchySimulation.HOP_LEAF_TO_SPINE -> source == 3 && psn == run.worker(3).psn(2, 0);
                // the spine's result for rack 1 (connection 1 -> 2) at message 4 position 2
                case HierarchySimulation.HOP_SPINE_TO_LEAF -> target == 1 && source == 1 &&
                    psn == run.worker(1).psn(4, 2);
                default -> false;
            };
            if (mark)
            {
                Ecn.markCe(buffer, hopFrame.l3Offset());
            }
        });
        try
        {
            run.run();
            for (int connection = 0; connection < 4; connection++)
            {
                final List<byte[]> delivered = run.delivered().get(connection);
                final int receiver = (connection + 1) % 4;
                assertThat(delivered).hasSize(messages * MSG_LEN);
                for (final byte[] result : delivered)
                {
                    assertValid(result);
                    final int index = BthHeader.psnDelta(frame.psn(), run.firstPsn(connection));
                    final int m = index / MSG_LEN;
                    final int p = index % MSG_LEN;
                    final boolean expected = m == 1 && p == 1 || m == 2 && p == 0 ||
                        m == 4 && p == 2 && (receiver == 2 || receiver == 3);
                    assertThat(frame.ecn() == Ecn.CE).as("connection %d message %d position %d", connection, m, p)
                        .isEqualTo(expected);
                }
                for (int m = 0; m < messages; m++)
                {
                    assertThat(run.deliveredMessage(connection, m)).isEqualTo(run.expectedMessage(connection, m));
                }
            }
        }
        finally
        {
            run.close();
        }
    }

    @AfterAll
    static void markedResultsShouldVerifyWithScapy() throws Exception
    {
        assumeTrue(!SCAPY_SAMPLE.isEmpty() && ScapyIcrc.available(), "scapy not available");
        final String output = ScapyIcrc.check(SCAPY_SAMPLE);
        assertThat(output).startsWith("checked " + SCAPY_SAMPLE.size() + " mismatches 0").endsWith("exit 0");
    }
}
