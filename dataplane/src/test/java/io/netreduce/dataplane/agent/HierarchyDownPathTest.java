package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.HierarchySimulation;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What a leaf does with frames on its entering cross-rack connection (the spine's results coming down) that are
 * not what it awaits: each is a counted drop, nothing reaches a worker, no state changes.
 * Ring 2 x 2: rack 0 = ranks 0, 1 (the leaf under test), rack 1 = ranks 2, 3; the entering connection is 3 → 0.
 */
class HierarchyDownPathTest
{
    private static final List<Integer> RACKS = List.of(1, 3);
    private static final RingDefinition RING = Rings.ring(5, 4, ElementType.FP32, 2, 3, 128);
    /** The same ring as the spine marks its results: frames built from it look like the spine's. */
    private static final RingDefinition MARKED = new RingDefinition(RING.ringId(), RING.jobName(), RING.elementType(),
        RING.window(), RING.msgLen(), RING.payloadSize(), RING.members(), RING.resultTag(), RING.resultTag());

    @Test
    void shouldDropASpineResultForAPositionWhoseRackSumTheLeafDoesNotHold()
    {
        try (DataplaneHarness leaf = leaf())
        {
            final List<byte[]> down = RingWorker.of(MARKED, 3, 1000).message(0, new byte[RingWorker.of(RING, 3, 0)
                .gradientBytes()]);
            for (final byte[] frame : down)
            {
                assertThat(leaf.process(frame)).isEmpty();
            }
            // A result for nothing awaited teaches the leaf no entering connection: its first packet is not awaited,
            // the others belong to no connection.
            assertThat(leaf.counter(DataplaneCounter.DROP_DOWN_NOT_AWAITED)).isEqualTo(1);
            assertThat(leaf.counter(DataplaneCounter.DROP_UNKNOWN_CONNECTION)).isEqualTo(2);
            assertThat(leaf.counter(DataplaneCounter.DOWN_CONNECTIONS)).isZero();
            assertThat(leaf.counter(DataplaneCounter.DOWN_RESULTS)).isZero();
        }
    }

    @Test
    void shouldDropASpineResultWithABadIcrcOrFromAnotherRankOrAddress()
    {
        try (DataplaneHarness leaf = leaf())
        {
            final int bytes = RingWorker.of(RING, 3, 0).gradientBytes();
            final byte[] corrupted = RingWorker.of(MARKED, 3, 1000).message(0, new byte[bytes]).getFirst();
            corrupted[corrupted.length - 10] ^= 1;
            assertThat(leaf.process(corrupted)).isEmpty();
            assertThat(leaf.counter(DataplaneCounter.DROP_BAD_ICRC)).isEqualTo(1);

            // Rank 2's connection (2 → 3) is no connection of this rack: a result tag on it is not the spine's.
            final byte[] otherRank = RingWorker.of(MARKED, 2, 1000).message(0, new byte[bytes]).getFirst();
            assertThat(leaf.process(otherRank)).isEmpty();
            assertThat(leaf.counter(DataplaneCounter.DROP_BAD_RANK)).isEqualTo(1);

            // Rank 3's header from another source address, ICRC made right: spoofed.
            final byte[] spoofed = RingWorker.of(MARKED, 3, 1000).message(0, new byte[bytes]).getFirst();
            final UnsafeBuffer buffer = new UnsafeBuffer(spoofed);
            final RoceFrame frame = new RoceFrame();
            frame.wrap(buffer, 0, spoofed.length);
            buffer.putByte(frame.srcAddressOffset() + 3, (byte)99);
            frame.wrap(buffer, 0, spoofed.length);
            new Icrc().write(buffer, frame);
            assertThat(leaf.process(spoofed)).isEmpty();
            assertThat(leaf.counter(DataplaneCounter.DROP_SPOOFED)).isEqualTo(1);
            assertThat(leaf.counter(DataplaneCounter.DOWN_CONNECTIONS)).isZero();
        }
    }

    @Test
    void shouldForwardARepeatedSpineResultOnlyWhenItIsTheResultTheLeafStored()
    {
        final int messages = 6;
        final HierarchySimulation run = HierarchySimulation.lossless(RING, RACKS, messages, 21).run();
        try
        {
            final DataplaneHarness leaf = run.leaf(0);
            final int last = messages - 1;
            final RingWorker spineSide = new RingWorker(MARKED, 3, run.worker(3).destQp(), run.firstPsn(3),
                RingWorker.macOf(3), RingWorker.macOf(0));
            final byte[] sum = run.hierarchicalSum(last);
            final List<byte[]> repeat = spineSide.message(last, sum);
            for (final byte[] frame : repeat)
            {
                assertThat(leaf.process(frame)).as("a repeat goes on to rank 0 only").hasSize(1);
            }
            assertThat(leaf.counter(DataplaneCounter.DOWN_REPEATED)).isEqualTo(3);

            final byte[] other = sum.clone();
            other[sum.length - 1] ^= 0x40;
            final List<byte[]> forged = spineSide.message(last, other);
            assertThat(leaf.process(forged.getLast())).isEmpty();
            assertThat(leaf.counter(DataplaneCounter.DROP_DOWN_MISMATCH)).isEqualTo(1);
        }
        finally
        {
            run.close();
        }
    }

    @Test
    void shouldNotLetAResultReplayedFromFurtherBackThanTheMsgIdReachesLearnTheEnteringConnectionAgain()
    {
        // Issue 30, the multi-rack bed: a stranger replayed the spine's real results (the spine's MAC, good ICRC)
        // from a call before. One from 128 or more messages back is off the connection's PSN sequence (MsgID has 8
        // bits), and the leaf took it for a new connection: the entry was populated again and where the messages
        // in flight began was forgotten, so the spine's next results were dropped (stale) and the ring stalled
        // while the replays went on. Now it is refused, and every result of the spine still reaches the rack.
        final int messages = 280;
        try (DataplaneHarness leaf = leaf())
        {
            final java.util.Random data = new java.util.Random(30);
            final RingWorker rank0 = RingWorker.of(RING, 0, 100);
            final RingWorker rank1 = RingWorker.of(RING, 1, 200);
            final RingWorker spine = RingWorker.of(MARKED, 3, 300);
            final int bytes = rank0.gradientBytes();
            final java.util.List<byte[]> recorded = new java.util.ArrayList<>();
            int replayed = 0;
            for (int m = 0; m < messages; m++)
            {
                rank0.message(m, io.netreduce.protocol.support.Gradients.random(RING.elementType(), bytes, data))
                    .forEach(leaf::process);
                rank1.message(m, io.netreduce.protocol.support.Gradients.random(RING.elementType(), bytes, data))
                    .forEach(leaf::process);
                final List<byte[]> down = spine.message(m,
                    io.netreduce.protocol.support.Gradients.random(RING.elementType(), bytes, data));
                if (m < 20)
                {
                    recorded.add(down.getFirst());
                }
                if (m >= 256 && m < 256 + recorded.size())
                {
                    // The result of message m - 256, which has message m's MsgID, while the leaf awaits m's: it used
                    // to be taken, its stale bytes for the rack's result. Off the sequence in the same run: refused.
                    assertThat(leaf.process(recorded.get(m - 256))).as("message %d: a replay of its MsgID", m)
                        .isEmpty();
                    replayed++;
                }
                int out = leaf.process(down.getFirst()).size();
                if (m >= 130 && m < 160)
                {
                    // Between the first packet of a result and the rest: the worst moment.
                    assertThat(leaf.process(recorded.get(m % recorded.size()))).as("message %d: a replay", m)
                        .isEmpty();
                    replayed++;
                }
                for (final byte[] frame : down.subList(1, down.size()))
                {
                    out += leaf.process(frame).size();
                }
                assertThat(out).as("message %d: the spine's result to ranks 0 and 1", m).isEqualTo(2 * RING.msgLen());
            }
            assertThat(leaf.counter(DataplaneCounter.DOWN_CONNECTIONS)).as("learned once").isEqualTo(1);
            // Replays from further back than 128 messages are off the sequence (refused as not awaited, or, with the
            // MsgID of an awaited result, as off the sequence); nearer ones are on it, and too old.
            assertThat(leaf.counter(DataplaneCounter.DROP_DOWN_OFF_SEQUENCE)).isEqualTo(recorded.size());
            assertThat(leaf.counter(DataplaneCounter.DROP_DOWN_OFF_SEQUENCE) +
                leaf.counter(DataplaneCounter.DROP_DOWN_NOT_AWAITED) +
                leaf.counter(DataplaneCounter.DROP_STALE_PACKET)).isEqualTo(replayed);
            assertThat(leaf.counter(DataplaneCounter.DOWN_RESULTS)).isEqualTo((long)messages * RING.msgLen());
        }
    }

    @Test
    void shouldPassAWorkersOwnMessageThatBypassedItsLeafThroughTheSpineUnaggregated()
    {
        // Rack 0's last rank (1) sends straight to the spine, its leaf bypassed: the spine must not take its
        // gradient for rack 0's partial sum. Its tag (NRED) is not the partial tag: passed on unchanged, so the
        // receiver (rank 2) finds a request tag where it expects the result tag and fails.
        try (DataplaneHarness spine = new DataplaneHarness())
        {
            spine.install(RING.withHierarchy(Hierarchy.spine(RACKS)));
            final List<byte[]> raw = RingWorker.of(RING, 1, 500).message(0, new byte[RingWorker.of(RING, 1, 0)
                .gradientBytes()]);
            final byte[] first = raw.getFirst();
            final List<byte[]> out = spine.process(first);
            assertThat(out).hasSize(1);
            assertThat(out.getFirst()).isEqualTo(first);
            for (final byte[] frame : raw.subList(1, raw.size()))
            {
                spine.process(frame);
            }
            assertThat(spine.counter(DataplaneCounter.RING_PACKETS)).isZero();
            assertThat(spine.counter(DataplaneCounter.FOREIGN_TAG_ON_RING_EDGE)).isEqualTo(1);
        }
    }

    @Test
    void shouldRefuseALeafRingWhoseResultsAreNotMarked()
    {
        try (DataplaneHarness leaf = new DataplaneHarness())
        {
            final RingDefinition unmarked = new RingDefinition(6, "job", ElementType.FP32, 2, 3, 128, RING.members(),
                InaHeader.INET_TAG, InaHeader.INET_TAG, Hierarchy.leaf(RACKS, 0));
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> leaf.install(unmarked))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("resultTag");
            final RingDefinition badRacks = RING.withHierarchy(Hierarchy.leaf(List.of(2, 1), 0));
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> leaf.install(badRacks))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("strictly increasing");
        }
    }

    private static DataplaneHarness leaf()
    {
        final DataplaneHarness leaf = new DataplaneHarness();
        leaf.install(RING.withHierarchy(Hierarchy.leaf(RACKS, 0)));
        return leaf;
    }
}
