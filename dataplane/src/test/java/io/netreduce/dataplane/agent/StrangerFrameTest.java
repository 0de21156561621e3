package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.Results;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A host on the switch that is not a member sends one crafted first packet: its own MAC, a member's source
 * address, the next member's destination address, any QP and PSN, a valid ICRC and an INA header for the ring's
 * message 0. It used to begin a new run of the ring, which made every member's connection stale: every later
 * all-reduce on the ring failed until the job was installed again. It must be refused and counted, and the ring
 * must go on with no operator action: during a call and between calls.
 */
class StrangerFrameTest
{
    private static final long STRANGER_MAC = 0x02_66_66_66_66_66L;
    private static final int W = 3;
    private static final int QP_BASE = 0x300;

    // The members' MACs are bound once each has taken part in MacBinding.MAC_BINDING_SUMS sums in a row (MsgLen 2:
    // two sums per message), so the stranger comes after 4 or more messages.

    @Test
    void shouldRefuseAStrangersFirstPacketBetweenCallsAndLetTheRingGoOn()
    {
        runWithStrangerAfter(8);
    }

    @Test
    void shouldRefuseAStrangersFirstPacketDuringACallAndLetTheRingGoOn()
    {
        runWithStrangerAfter(5);
    }

    /**
     * Members all-reduce 12 messages on persistent connections (lockstep, window never exceeded); after
     * {@code strangerAfter} of them the stranger's frame arrives. Every message must still deliver the exact sum.
     */
    private static void runWithStrangerAfter(final int strangerAfter)
    {
        final RingDefinition config = Rings.ring(1, W, ElementType.FP32, 4, 2, 256);
        final int messages = 12;
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            final Random data = new Random(strangerAfter);
            final RingWorker[] members = new RingWorker[W];
            final byte[][][] gradients = new byte[messages][W][];
            for (int r = 0; r < W; r++)
            {
                final int successor = (r + 1) % W;
                members[r] = new RingWorker(config, r, QP_BASE + successor, data.nextInt(1 << 24),
                    RingWorker.macOf(r), RingWorker.macOf(successor));
                for (int m = 0; m < messages; m++)
                {
                    gradients[m][r] = Gradients.random(config.elementType(), members[r].gradientBytes(), data);
                }
            }
            final RingWorker stranger = new RingWorker(config, 0, 0x999, data.nextInt(1 << 24), STRANGER_MAC,
                RingWorker.macOf(1));
            final byte[] crafted = stranger.message(0, Gradients.random(config.elementType(),
                stranger.gradientBytes(), data)).getFirst();

            final List<List<byte[]>> results = List.of(new ArrayList<>(), new ArrayList<>(), new ArrayList<>());
            final RoceFrame frame = new RoceFrame();
            for (int m = 0; m < messages; m++)
            {
                if (m == strangerAfter)
                {
                    assertThat(harness.process(crafted)).as("the crafted frame goes nowhere").isEmpty();
                }
                for (int r = 0; r < W; r++)
                {
                    for (final byte[] packet : members[r].message(m, gradients[m][r]))
                    {
                        for (final byte[] out : harness.process(packet))
                        {
                            frame.wrap(new UnsafeBuffer(out), 0, out.length);
                            // Keyed by the sending rank: the connection r -> r + 1 goes to receive QP base + r + 1.
                            results.get((frame.destQp() - QP_BASE + W - 1) % W).add(out);
                        }
                    }
                }
            }
            for (int r = 0; r < W; r++)
            {
                for (int m = 0; m < messages; m++)
                {
                    final byte[] sum = Gradients.referenceSum(config.elementType(), gradients[m]);
                    assertThat(Results.payloads(results.get(r), m, config.msgLen()))
                        .as("connection %d message %d", r, m).isEqualTo(Results.expected(config, r, m, sum));
                }
            }
            assertThat(harness.counter(DataplaneCounter.DROP_MAC_MISMATCH)).as("the refusal, counted").isEqualTo(1);
            assertThat(harness.counter(DataplaneCounter.RING_RESTARTS)).isZero();
            assertThat(harness.counter(DataplaneCounter.DROP_STALE_CONNECTION)).isZero();
        }
    }

    @Test
    void shouldLetTheMembersOfAFreshRingTakeTheirRankFromAStrangerWhoseFrameCameFirst()
    {
        // No members[].mac and no sum yet, so no MAC is bound: the stranger's frame is the rank's first
        // connection. The member's own first packet must take the rank back (and the stranger's gradient must not
        // be summed), with no operator action. Stranger as rank 0 and as rank 1; a message of 2 packets and of 1.
        for (final int msgLen : new int[]{ 2, 1 })
        {
            for (int strangerRank = 0; strangerRank < 2; strangerRank++)
            {
                final RingDefinition config = Rings.ring(1, W, ElementType.FP32, 4, msgLen, 256);
                try (DataplaneHarness harness = new DataplaneHarness())
                {
                    harness.install(config);
                    final Lockstep ring = new Lockstep(harness, config, 12, strangerRank * 10 + msgLen);
                    assertThat(harness.process(ring.crafted(strangerRank))).as("the crafted frame").isEmpty();
                    ring.run(0);
                    ring.assertExactSums("stranger as rank " + strangerRank + ", MsgLen " + msgLen);
                    assertThat(harness.counter(DataplaneCounter.RING_CONNECTIONS_REPLACED)).isEqualTo(1);
                    assertThat(harness.counter(DataplaneCounter.DROP_RANK_TAKEN_OVER)).isEqualTo(1);
                    assertThat(harness.counter(DataplaneCounter.DROP_RUN_IN_PROGRESS)).isZero();
                    assertThat(harness.counter(DataplaneCounter.RING_RESTARTS)).isZero();
                }
            }
        }
    }

    @Test
    void shouldGiveTheRankBackToItsMemberWhenAStrangerCameBetweenItsFirstPacketAndTheRingsFirstSum()
    {
        // The member of rank 0 has sent message 0 when the stranger's frame claims its rank; the stranger's
        // gradient is not taken, and the member's go-back-N retransmission takes the rank back.
        final RingDefinition config = Rings.ring(1, W, ElementType.FP32, 4, 2, 256);
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            final Lockstep ring = new Lockstep(harness, config, 12, 77);
            ring.send(0, 0);
            assertThat(harness.process(ring.crafted(0))).as("the crafted frame").isEmpty();
            ring.run(0);
            ring.assertExactSums("stranger after the member's first message");
            assertThat(harness.counter(DataplaneCounter.RING_CONNECTIONS_REPLACED)).isEqualTo(2);
            assertThat(harness.counter(DataplaneCounter.RING_RESTARTS)).isZero();
        }
    }

    /**
     * The members of a ring on persistent connections, in lockstep (each message once every rank has the
     * previous one's result), with RC go-back-N: a connection whose results did not all arrive resends from its
     * first undelivered message, as after an RC timeout. Receivers accept results in PSN order only (RC).
     */
    private static final class Lockstep
    {
        private final DataplaneHarness harness;
        private final RingDefinition config;
        private final int messages;
        private final Random data;
        private final RingWorker[] members = new RingWorker[W];
        private final byte[][][] gradients;
        private final List<List<byte[]>> delivered = List.of(new ArrayList<>(), new ArrayList<>(), new ArrayList<>());
        private final int[] sent = new int[W];
        private final RoceFrame frame = new RoceFrame();

        Lockstep(final DataplaneHarness harness, final RingDefinition config, final int messages, final long seed)
        {
            this.harness = harness;
            this.config = config;
            this.messages = messages;
            this.data = new Random(seed);
            this.gradients = new byte[messages][W][];
            for (int r = 0; r < W; r++)
            {
                final int successor = (r + 1) % W;
                members[r] = new RingWorker(config, r, QP_BASE + successor, data.nextInt(1 << 24),
                    RingWorker.macOf(r), RingWorker.macOf(successor));
                for (int m = 0; m < messages; m++)
                {
                    gradients[m][r] = Gradients.random(config.elementType(), members[r].gradientBytes(), data);
                }
            }
        }

        /**
         * @return the stranger's first packet of message 0 for {@code rank}'s edge: its own MAC, another QP.
         */
        byte[] crafted(final int rank)
        {
            final RingWorker stranger = new RingWorker(config, rank, 0x999, data.nextInt(1 << 24), STRANGER_MAC,
                RingWorker.macOf((rank + 1) % W));
            return stranger.message(0, Gradients.random(config.elementType(), stranger.gradientBytes(), data))
                .getFirst();
        }

        void send(final int rank, final int m)
        {
            for (final byte[] packet : members[rank].message(m, gradients[m][rank]))
            {
                for (final byte[] out : harness.process(packet))
                {
                    frame.wrap(new UnsafeBuffer(out), 0, out.length);
                    assertThat(frame.destQp()).as("results go to the members' receive QPs").isBetween(QP_BASE,
                        QP_BASE + W - 1);
                    // Keyed by the sending rank: the connection r -> r + 1 goes to receive QP base + r + 1.
                    final int connection = (frame.destQp() - QP_BASE + W - 1) % W;
                    final List<byte[]> list = delivered.get(connection);
                    final int index = list.size();
                    if (frame.psn() == members[connection].psn(index / config.msgLen(), index % config.msgLen()))
                    {
                        list.add(out);
                    }
                }
            }
            sent[rank] = Math.max(sent[rank], m + 1);
        }

        void run(final int from)
        {
            for (int m = from; m < messages; m++)
            {
                for (int r = 0; r < W; r++)
                {
                    if (sent[r] <= m)
                    {
                        send(r, m);
                    }
                }
                for (int timeouts = 0; !allDelivered(m + 1); timeouts++)
                {
                    assertThat(timeouts).as("RC timeouts for message %d", m).isLessThan(5);
                    for (int r = 0; r < W; r++)
                    {
                        for (int k = delivered.get(r).size() / config.msgLen(); k < sent[r]; k++)
                        {
                            send(r, k);
                        }
                    }
                }
            }
        }

        private boolean allDelivered(final int count)
        {
            for (int r = 0; r < W; r++)
            {
                if (delivered.get(r).size() < count * config.msgLen())
                {
                    return false;
                }
            }
            return true;
        }

        void assertExactSums(final String what)
        {
            for (int r = 0; r < W; r++)
            {
                for (int m = 0; m < messages; m++)
                {
                    final byte[] sum = Gradients.referenceSum(config.elementType(), gradients[m]);
                    assertThat(Results.payloads(delivered.get(r), m, config.msgLen()))
                        .as("%s: connection %d message %d", what, r, m).isEqualTo(Results.expected(config, r, m, sum));
                }
            }
        }
    }

    @Test
    void shouldNotLetANewConnectionBeginANewRunWhileMessagesAreInFlight()
    {
        final RingDefinition config = Rings.ring(2, 2, ElementType.INT32, 2, 2, 64);
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            final Random data = new Random(3);
            final RingWorker rank0 = RingWorker.of(config, 0, 100);
            final RingWorker rank1 = RingWorker.of(config, 1, 200);
            final byte[] g = Gradients.random(config.elementType(), rank0.gradientBytes(), data);
            // Both ranks complete message 0 (the MACs are bound), then rank 0 starts message 1: in flight.
            rank0.message(0, g).forEach(harness::process);
            rank1.message(0, g).forEach(harness::process);
            harness.process(rank0.message(1, g).getFirst());
            // Rank 1 "reconnects" from its own MAC on another QP number: not while message 1 is in flight.
            final RingWorker again = new RingWorker(config, 1, 0x555, 7, RingWorker.macOf(1), RingWorker.macOf(0));
            assertThat(harness.process(again.message(0, g).getFirst())).isEmpty();
            assertThat(harness.counter(DataplaneCounter.DROP_RUN_IN_PROGRESS)).isEqualTo(1);
            assertThat(harness.counter(DataplaneCounter.RING_RESTARTS)).isZero();
            // ...and the run in flight finishes.
            rank0.message(1, g).stream().skip(1).forEach(harness::process);
            final List<byte[]> out = new ArrayList<>();
            rank1.message(1, g).forEach(p -> out.addAll(harness.process(p)));
            assertThat(out).as("both ranks' results of message 1").hasSize(2 * config.msgLen());
        }
    }
}
