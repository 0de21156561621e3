package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.Results;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 30 item 5: a host on the switch floods frames with a member's IP <em>and</em> MAC (rank 0's), valid ICRC and
 * INA header, towards the successor's real receive QP. Frames no member sends (802.1Q-tagged, QinQ, tagged with the
 * tag taken off by the port's kernel, to a broadcast or multicast MAC) are refused before any ring state is touched,
 * each counted, and the ring goes on exactly. Middle packets on a member's connection from another MAC, and a leaf's
 * spine results from another MAC than the spine's, are refused the same way: they used to be summed.
 */
class MemberLinkLayerTest
{
    private static final int W = 3;
    private static final int QP_BASE = 0x300;
    private static final long STRANGER_MAC = 0x02_66_66_66_66_66L;
    private static final long BROADCAST = 0xFFFF_FFFF_FFFFL;
    private static final long MULTICAST = 0x01_00_5E_00_00_01L;

    @Test
    void shouldRefuseAMembersFirstPacketsThatArriveTaggedOrNotUnicastAndKeepTheRingExact()
    {
        final RingDefinition config = Rings.ring(1, W, ElementType.FP32, 4, 2, 256);
        final int messages = 24;
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            final Random data = new Random(30);
            final RingWorker[] members = members(config, data);
            final byte[][][] gradients = gradients(config, members, messages, data);
            // Rank 0's addresses and MAC, rank 1's real receive QP, a PSN of its own, poison for a gradient.
            final RingWorker forger = new RingWorker(config, 0, QP_BASE + 1, data.nextInt(1 << 24),
                RingWorker.macOf(0), RingWorker.macOf(1));
            final RingWorker broadcaster = new RingWorker(config, 0, QP_BASE + 1, data.nextInt(1 << 24),
                RingWorker.macOf(0), BROADCAST);
            final RingWorker multicaster = new RingWorker(config, 0, QP_BASE + 1, data.nextInt(1 << 24),
                RingWorker.macOf(0), MULTICAST);
            final byte[] poison = poison(forger.gradientBytes());

            final List<List<byte[]>> results = List.of(new ArrayList<>(), new ArrayList<>(), new ArrayList<>());
            int tagged = 0;
            int notUnicast = 0;
            for (int m = 0; m < messages; m++)
            {
                for (int r = 0; r < W; r++)
                {
                    // Before every member packet (the ring idle, mid-message, or a message just complete), one
                    // forgery of each kind, the message and the next as MsgIDs.
                    for (final byte[] packet : members[r].message(m, gradients[m][r]))
                    {
                        final byte[] first = forger.message(m + r % 2, poison).getFirst();
                        assertThat(harness.process(withTags(first, 0x8100, 5))).isEmpty();
                        assertThat(harness.process(withTags(first, 0x88A8, 7, 0x8100, 5))).isEmpty();
                        harness.port(0).inject(first, FrameHandler.FLAG_VLAN_TAG_STRIPPED);
                        assertThat(harness.runAndDrain(0)).as("tag taken off by the port's kernel").isEmpty();
                        tagged += 3;
                        assertThat(harness.process(broadcaster.message(m, poison).getFirst())).isEmpty();
                        assertThat(harness.process(multicaster.message(m, poison).getFirst())).isEmpty();
                        notUnicast += 2;
                        // A member's own packet, tagged on the way: refused too (its untagged copy is summed).
                        assertThat(harness.process(withTags(packet, 0x8100, 5))).isEmpty();
                        tagged++;
                        collect(harness.process(packet), results);
                    }
                }
            }
            assertExact(config, gradients, results, messages);
            assertThat(harness.counter(DataplaneCounter.DROP_VLAN_TAGGED)).isEqualTo(tagged);
            assertThat(harness.counter(DataplaneCounter.DROP_NOT_UNICAST)).isEqualTo(notUnicast);
            assertThat(harness.counter(DataplaneCounter.RING_RESTARTS)).isZero();
            assertThat(harness.counter(DataplaneCounter.DROP_RUN_IN_PROGRESS)).isZero();
            assertThat(harness.counter(DataplaneCounter.RING_CONNECTIONS_REPLACED)).isZero();
        }
    }

    @Test
    void shouldRefuseAMiddlePacketFromAnotherMacOnABoundMembersConnection()
    {
        // A host that knows (or guesses) rank 0's QP and PSN sends a middle packet of the message in flight with
        // rank 0's address, its own MAC, a valid ICRC and poison, after rank 0's own: it used to overwrite rank 0's
        // contribution (a duplicate of a pending aggregation overwrites its bytes) and the sum came out wrong.
        final RingDefinition config = Rings.ring(1, W, ElementType.FP32, 4, 2, 256);
        final int messages = 8;
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            final Random data = new Random(31);
            final RingWorker[] members = members(config, data);
            final byte[][][] gradients = gradients(config, members, messages, data);
            // On rank 0's connection: its QP and its PSNs.
            final RingWorker stranger = new RingWorker(config, 0, QP_BASE + 1, firstPsn(0), STRANGER_MAC,
                RingWorker.macOf(1));
            final List<List<byte[]>> results = List.of(new ArrayList<>(), new ArrayList<>(), new ArrayList<>());
            int refused = 0;
            for (int m = 0; m < messages; m++)
            {
                for (int r = 0; r < W; r++)
                {
                    for (final byte[] packet : members[r].message(m, gradients[m][r]))
                    {
                        collect(harness.process(packet), results);
                    }
                    if (r == 0 && m >= 4)
                    {
                        // The MACs are bound after 8 sums (4 messages of 2 packets).
                        assertThat(harness.process(stranger.message(m, poison(stranger.gradientBytes())).getLast()))
                            .isEmpty();
                        refused++;
                    }
                }
            }
            assertExact(config, gradients, results, messages);
            assertThat(harness.counter(DataplaneCounter.DROP_MAC_MISMATCH)).isEqualTo(refused);
        }
    }

    @Test
    void shouldTakeALeafsSpineResultsOnlyFromTheSpinesMac()
    {
        // Leaf of rack 0 (ranks 0, 1) of a 2 x 2 ring; the spine's results come down on 3 -> 0 with rank 3's MAC.
        // A host on the rack's switch that sends a result for a position the leaf awaits, with rank 3's address and
        // its own MAC, used to have it taken: its bytes became the rack's result.
        final RingDefinition ring = Rings.ring(5, 4, ElementType.FP32, 2, 3, 128);
        final RingDefinition marked = new RingDefinition(ring.ringId(), ring.jobName(), ring.elementType(),
            ring.window(), ring.msgLen(), ring.payloadSize(), ring.members(), ring.resultTag(), ring.resultTag());
        for (final boolean configured : new boolean[] { false, true })
        {
            final List<RingMember> members = new ArrayList<>(ring.members());
            if (configured)
            {
                members.set(3, new RingMember(3, members.get(3).address(), RingMember.ANY, RingWorker.macOf(3)));
            }
            final RingDefinition leafRing = new RingDefinition(ring.ringId(), ring.jobName(), ring.elementType(),
                ring.window(), ring.msgLen(), ring.payloadSize(), members, ring.inetTag(), ring.resultTag(),
                Hierarchy.leaf(List.of(1, 3), 0));
            try (DataplaneHarness leaf = new DataplaneHarness())
            {
                leaf.install(leafRing);
                final Random data = new Random(32);
                final RingWorker rank0 = RingWorker.of(ring, 0, 100);
                final RingWorker rank1 = RingWorker.of(ring, 1, 200);
                final RingWorker spine = RingWorker.of(marked, 3, 300);
                final RingWorker stranger = new RingWorker(marked, 3, spine.destQp(), 300, STRANGER_MAC,
                    RingWorker.macOf(0));
                final int bytes = rank0.gradientBytes();
                // Without a configured MAC, the spine's MAC is bound by 8 results in a row: 3 messages of 3.
                final int from = configured ? 0 : 3;
                for (int m = 0; m < 5; m++)
                {
                    rank0.message(m, Gradients.random(ring.elementType(), bytes, data)).forEach(leaf::process);
                    final List<byte[]> up = new ArrayList<>();
                    rank1.message(m, Gradients.random(ring.elementType(), bytes, data))
                        .forEach(p -> up.addAll(leaf.process(p)));
                    assertThat(up).as("message %d: the partial goes up", m).hasSize(3);
                    final byte[] sum = Gradients.random(ring.elementType(), bytes, data);
                    if (m >= from)
                    {
                        for (final byte[] forged : stranger.message(m, poison(bytes)))
                        {
                            assertThat(leaf.process(forged)).as("message %d: a stranger's result", m).isEmpty();
                        }
                    }
                    final List<byte[]> down = new ArrayList<>();
                    spine.message(m, sum).forEach(p -> down.addAll(leaf.process(p)));
                    assertThat(down).as("message %d: the spine's result to ranks 0 and 1", m).hasSize(6);
                    for (final byte[] frame : down)
                    {
                        assertThat(Arrays.equals(frame, frame.length - 4 - 128, frame.length - 4,
                            poison(bytes), 0, 128)).isFalse();
                    }
                }
                // Configured: message 0's forged middle and last packets find no entering connection yet (its first
                // packet was refused): unknown connections on a ring edge, dropped too.
                assertThat(leaf.counter(DataplaneCounter.DROP_MAC_MISMATCH)).as("configured %s", configured)
                    .isEqualTo(configured ? 13 : 6);
                assertThat(leaf.counter(DataplaneCounter.DROP_UNKNOWN_CONNECTION)).isEqualTo(configured ? 2 : 0);
                assertThat(leaf.counter(DataplaneCounter.DOWN_RESULTS)).isEqualTo(15);
            }
        }
    }

    private static RingWorker[] members(final RingDefinition config, final Random data)
    {
        final RingWorker[] members = new RingWorker[W];
        for (int r = 0; r < W; r++)
        {
            final int successor = (r + 1) % W;
            members[r] = new RingWorker(config, r, QP_BASE + successor, firstPsn(r), RingWorker.macOf(r),
                RingWorker.macOf(successor));
        }
        return members;
    }

    private static int firstPsn(final int rank)
    {
        return 0x10_0000 * (rank + 1) + 77;
    }

    private static byte[][][] gradients(
        final RingDefinition config, final RingWorker[] members, final int messages, final Random data)
    {
        final byte[][][] gradients = new byte[messages][W][];
        for (int m = 0; m < messages; m++)
        {
            for (int r = 0; r < W; r++)
            {
                gradients[m][r] = Gradients.random(config.elementType(), members[r].gradientBytes(), data);
            }
        }
        return gradients;
    }

    private static byte[] poison(final int bytes)
    {
        final byte[] poison = new byte[bytes];
        for (int i = 0; i + 3 < bytes; i += 4)
        {
            poison[i + 2] = (byte)0x9A;
            poison[i + 3] = 0x70; // 1.5e29f, little-endian
        }
        return poison;
    }

    private static void collect(final List<byte[]> out, final List<List<byte[]>> results)
    {
        final RoceFrame frame = new RoceFrame();
        for (final byte[] bytes : out)
        {
            frame.wrap(new UnsafeBuffer(bytes), 0, bytes.length);
            // Keyed by the sending rank: the connection r -> r + 1 goes to receive QP base + r + 1.
            results.get((frame.destQp() - QP_BASE + W - 1) % W).add(bytes);
        }
    }

    private static void assertExact(final RingDefinition config, final byte[][][] gradients,
        final List<List<byte[]>> results, final int messages)
    {
        for (int r = 0; r < W; r++)
        {
            for (int m = 0; m < messages; m++)
            {
                final byte[] sum = Gradients.referenceSum(config.elementType(), gradients[m]);
                assertThat(Results.payloads(results.get(r), m, config.msgLen()))
                    .as("connection %d message %d", r, m).isEqualTo(Results.expected(config, r, m, sum));
            }
        }
    }

    /**
     * @param tags pairs of (TPID, VLAN id), outermost first, inserted after the two MACs.
     */
    static byte[] withTags(final byte[] frame, final int... tags)
    {
        final int extra = tags.length / 2 * 4;
        final byte[] tagged = new byte[frame.length + extra];
        System.arraycopy(frame, 0, tagged, 0, 12);
        for (int i = 0; i < tags.length; i += 2)
        {
            final int at = 12 + i * 2;
            tagged[at] = (byte)(tags[i] >>> 8);
            tagged[at + 1] = (byte)tags[i];
            tagged[at + 2] = (byte)(tags[i + 1] >>> 8);
            tagged[at + 3] = (byte)tags[i + 1];
        }
        System.arraycopy(frame, 12, tagged, 12 + extra, frame.length - 12);
        return tagged;
    }
}
