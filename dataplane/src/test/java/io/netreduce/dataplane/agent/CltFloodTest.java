package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.Results;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A host on the switch that is not a member floods first packets on a ring edge (a member's source address, its own
 * MAC), each on a QP of its own: RDMA WRITE FIRSTs the ring does not tag, so the appliance learns each as a
 * <em>foreign</em> connection. 20,000 of them used to fill the CLT ({@code clt_full}): for the foreign entries' idle
 * time (60 s) every new connection of every ring was dropped. Foreign connections now have a share of the CLT of
 * their own, in total and per source address; what is over it is a counted drop, and the members' connections
 * always find room.
 */
class CltFloodTest
{
    private static final long STRANGER_MAC = 0x02_66_66_66_66_66L;
    private static final int W = 3;
    private static final int QP_BASE = 0x300;
    private static final int FLOOD = 20_000;

    @Test
    void shouldKeepRoomForTheMembersWhenAStrangerFloodsFirstPacketsOnDistinctQps()
    {
        final RingDefinition config = Rings.ring(1, W, ElementType.FP32, 4, 2, 256);
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            flood(harness, untaggedFirst(config, 0), FLOOD);

            final long learnt = harness.counter(DataplaneCounter.CLT_FOREIGN);
            assertThat(learnt).as("foreign connections learnt from one source")
                .isEqualTo(DataplaneContext.DEFAULT_CLT_FOREIGN_PER_SOURCE);
            assertThat(harness.counter(DataplaneCounter.DROP_CLT_FOREIGN_SOURCE_LIMIT)).as("the rest, counted drops")
                .isEqualTo(FLOOD - learnt);
            assertThat(harness.agent().tables().clt().size()).isEqualTo((int)learnt);

            runMembers(harness, config, 8, 1);
            assertThat(harness.counter(DataplaneCounter.DROP_CLT_FULL)).isZero();
            assertThat(harness.counter(DataplaneCounter.CLT_FULL)).isZero();
        }
    }

    @Test
    void shouldBoundForeignConnectionsInTotalAndStillLearnAnotherSourcesOnes()
    {
        // The stranger floods every edge of a ring of 8 (each a source of its own): the total share is the bound;
        // the members' own connections still go in, and so would a legitimate client's once the share frees.
        final int ranks = 8;
        final RingDefinition config = Rings.ring(2, ranks, ElementType.FP32, 4, 2, 256);
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            for (int rank = 0; rank < ranks; rank++)
            {
                flood(harness, untaggedFirst(config, rank), FLOOD / ranks);
            }
            assertThat(harness.counter(DataplaneCounter.CLT_FOREIGN)).as("the total share")
                .isEqualTo(DataplaneContext.DEFAULT_CLT_FOREIGN_ENTRIES);
            assertThat(harness.counter(DataplaneCounter.DROP_CLT_FOREIGN_LIMIT) +
                harness.counter(DataplaneCounter.DROP_CLT_FOREIGN_SOURCE_LIMIT))
                .isEqualTo(FLOOD - DataplaneContext.DEFAULT_CLT_FOREIGN_ENTRIES);
            // Each connection learnt is reported once for the log; what the event buffer could not hold is counted.
            final int[] reported = { 0 };
            harness.proxy().drainForeignTags(event -> reported[0]++);
            assertThat(reported[0] + harness.counter(DataplaneCounter.FOREIGN_TAG_EVENTS_LOST))
                .isEqualTo(harness.counter(DataplaneCounter.FOREIGN_TAG_ON_RING_EDGE))
                .isEqualTo(DataplaneContext.DEFAULT_CLT_FOREIGN_ENTRIES);
            assertThat(harness.counter(DataplaneCounter.FOREIGN_TAG_EVENTS_LOST)).isPositive();
            runMembers(harness, config, 4, 2);
            assertThat(harness.counter(DataplaneCounter.DROP_CLT_FULL)).isZero();
        }
    }

    @Test
    void shouldLearnAnotherSourcesForeignConnectionWhileOneSourceIsAtItsLimit()
    {
        final RingDefinition config = Rings.ring(1, W, ElementType.FP32, 4, 2, 256);
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            flood(harness, untaggedFirst(config, 0), FLOOD);
            final long learnt = harness.counter(DataplaneCounter.CLT_FOREIGN);
            // Another client between members 1 and 2: its first packet is learnt and passed on, and so is its next.
            final List<byte[]> other = foreignMessage(config, 1, 0x777);
            assertThat(harness.process(other.get(0))).as("its first packet, passed through").hasSize(1);
            assertThat(harness.process(other.get(1))).as("its next packet, passed through").hasSize(1);
            assertThat(harness.counter(DataplaneCounter.CLT_FOREIGN)).isEqualTo(learnt + 1);
            assertThat(harness.counter(DataplaneCounter.DROP_UNKNOWN_CONNECTION)).isZero();
        }
    }

    @Test
    void shouldCountAFirstPacketForAnUninstalledRingOverTheShareAsADrop()
    {
        // Tagged for a ring that is not installed, on an installed ring's edge: learnt as foreign too.
        final RingDefinition config = Rings.ring(1, W, ElementType.FP32, 4, 2, 256);
        final RingDefinition other = Rings.ring(99, W, ElementType.FP32, 4, 2, 256);
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            final byte[] first = new RingWorker(other, 0, 0x999, 1, STRANGER_MAC, RingWorker.macOf(1))
                .message(0, new byte[new RingWorker(other, 0, 0x999, 1, 0, 0).gradientBytes()]).getFirst();
            flood(harness, first, FLOOD);
            assertThat(harness.counter(DataplaneCounter.CLT_FOREIGN))
                .isEqualTo(DataplaneContext.DEFAULT_CLT_FOREIGN_PER_SOURCE);
            assertThat(harness.counter(DataplaneCounter.DROP_CLT_FOREIGN_SOURCE_LIMIT))
                .isEqualTo(FLOOD - DataplaneContext.DEFAULT_CLT_FOREIGN_PER_SOURCE);
            runMembers(harness, config, 8, 3);
            assertThat(harness.counter(DataplaneCounter.DROP_CLT_FULL)).isZero();
        }
    }

    @Test
    void shouldLetTheMembersInWhenAStrangersReplacedConnectionsFillTheClt()
    {
        // A fresh ring (no MAC bound yet): each of the stranger's tagged first packets, on a QP of its own, takes
        // rank 0 over (and is not summed), leaving the previous one a stale ring entry. A CLT of 64 entries fills
        // with them; the next connection evicts a stale entry instead of being refused.
        final RingDefinition config = Rings.ring(1, W, ElementType.FP32, 4, 2, 256);
        try (DataplaneHarness harness = new DataplaneHarness(context -> context.cltEntries(64)))
        {
            harness.install(config);
            final Random data = new Random(5);
            for (int i = 0; i < 100; i++)
            {
                final RingWorker stranger = new RingWorker(config, 0, 0x10000 + i, data.nextInt(1 << 24),
                    STRANGER_MAC, RingWorker.macOf(1));
                assertThat(harness.process(stranger.message(0, new byte[stranger.gradientBytes()]).getFirst()))
                    .isEmpty();
            }
            assertThat(harness.counter(DataplaneCounter.RING_CONNECTIONS_REPLACED)).isEqualTo(99);
            assertThat(harness.counter(DataplaneCounter.CLT_EVICTED)).as("stale entries evicted").isEqualTo(100 - 64);
            runMembers(harness, config, 8, 4);
            assertThat(harness.counter(DataplaneCounter.DROP_CLT_FULL)).isZero();
            assertThat(harness.counter(DataplaneCounter.CLT_EVICTED)).isEqualTo(100 - 64 + W);
        }
    }

    /**
     * @return the first packet of a message on {@code rank}'s edge with a tag the ring does not use (so untagged to
     *         the appliance), from the stranger's MAC.
     */
    private static byte[] untaggedFirst(final RingDefinition config, final int rank)
    {
        return foreignMessage(config, rank, 0x999).getFirst();
    }

    private static List<byte[]> foreignMessage(final RingDefinition config, final int rank, final int qp)
    {
        final RingDefinition otherTag = new RingDefinition(config.ringId(), config.jobName(), config.elementType(),
            config.window(), config.msgLen(), config.payloadSize(), config.members(), 0x4F544852, config.resultTag());
        final RingWorker worker = new RingWorker(otherTag, rank, qp, 1, STRANGER_MAC,
            RingWorker.macOf((rank + 1) % config.worldSize()));
        return worker.message(0, new byte[worker.gradientBytes()]);
    }

    /**
     * Send {@code count} copies of {@code first}, each to a QP of its own.
     */
    private static void flood(final DataplaneHarness harness, final byte[] first, final int count)
    {
        final RoceFrame frame = new RoceFrame();
        final UnsafeBuffer buffer = new UnsafeBuffer(first);
        frame.wrap(buffer, 0, first.length);
        final int qpOffset = frame.bthOffset() + BthHeader.DEST_QP_OFFSET;
        for (int i = 0; i < count; i++)
        {
            final int qp = 0x10000 + i;
            buffer.putByte(qpOffset + 1, (byte)(qp >>> 16));
            buffer.putByte(qpOffset + 2, (byte)(qp >>> 8));
            buffer.putByte(qpOffset + 3, (byte)qp);
            harness.port(0).inject(first.clone());
            if (i % 1000 == 999)
            {
                harness.runAndDrain(0);
            }
        }
        harness.runAndDrain(0);
    }

    /**
     * The members, on fresh connections, all-reduce {@code messages} messages in lockstep; a rank whose connection
     * did not get a message's whole result resends the message (go-back-N after an RC timeout), as a rank whose
     * first packet took its rank back from a stranger must. Every result must be the exact sum.
     */
    private static void runMembers(
        final DataplaneHarness harness, final RingDefinition config, final int messages, final long seed)
    {
        final int w = config.worldSize();
        final int msgLen = config.msgLen();
        final Random data = new Random(seed);
        final RingWorker[] members = new RingWorker[w];
        final byte[][][] gradients = new byte[messages][w][];
        for (int r = 0; r < w; r++)
        {
            final int successor = (r + 1) % w;
            members[r] = new RingWorker(config, r, QP_BASE + successor, data.nextInt(1 << 24),
                RingWorker.macOf(r), RingWorker.macOf(successor));
            for (int m = 0; m < messages; m++)
            {
                gradients[m][r] = Gradients.random(config.elementType(), members[r].gradientBytes(), data);
            }
        }
        final List<java.util.TreeMap<Integer, byte[]>> results = new ArrayList<>();
        for (int r = 0; r < w; r++)
        {
            results.add(new java.util.TreeMap<>());
        }
        final RoceFrame frame = new RoceFrame();
        for (int m = 0; m < messages; m++)
        {
            for (int attempt = 0; attempt < 4; attempt++)
            {
                for (int r = 0; r < w; r++)
                {
                    if (results.get(r).subMap(m * msgLen, (m + 1) * msgLen).size() == msgLen)
                    {
                        continue;
                    }
                    for (final byte[] packet : members[r].message(m, gradients[m][r]))
                    {
                        for (final byte[] out : harness.process(packet))
                        {
                            frame.wrap(new UnsafeBuffer(out), 0, out.length);
                            final int connection = (frame.destQp() - QP_BASE + w - 1) % w;
                            final int index = (frame.psn() - members[connection].psn(0, 0)) & BthHeader.PSN_MASK;
                            results.get(connection).putIfAbsent(index, out);
                        }
                    }
                }
            }
        }
        for (int r = 0; r < w; r++)
        {
            final List<byte[]> delivered = new ArrayList<>(results.get(r).values());
            for (int m = 0; m < messages; m++)
            {
                final byte[] sum = Gradients.referenceSum(config.elementType(), gradients[m]);
                assertThat(Results.payloads(delivered, m, msgLen))
                    .as("connection %d message %d", r, m).isEqualTo(Results.expected(config, r, m, sum));
            }
        }
    }
}
