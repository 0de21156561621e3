package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.aggregator.AggregatorRegion;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.dataplane.support.RingSimulation;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.protocol.support.ScapyIcrc;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.L4Checksum;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.wire.TestPcap;
import io.netreduce.protocol.wire.UdpHeader;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class DataplaneSafetyTest
{
    private static final RingDefinition RING_7 = Rings.ring(7, 4, ElementType.FP32, 2, 3, 128);

    @Test
    void shouldNeverLetAPacketClaimingRank2FromRank3sAddressChangeAResult() throws Exception
    {
        assertSpoofIgnored(Rings.address(3, false));
    }

    @Test
    void shouldNeverLetAPacketClaimingRank2FromAnOutsideAddressChangeAResult() throws Exception
    {
        assertSpoofIgnored(InetAddress.getByName("10.9.9.9"));
    }

    private void assertSpoofIgnored(final InetAddress spoofer)
    {
        final List<RingMember> members = new ArrayList<>(RING_7.members());
        members.set(2, new RingMember(2, spoofer));
        final RingDefinition forged = new RingDefinition(7, "forged", ElementType.FP32, 2, 3, 128, members);
        final RingWorker attacker = RingWorker.of(forged, 2, 500);
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(RING_7);
            final byte[] poison = Gradients.random(ElementType.FP32, attacker.gradientBytes(), new Random(1));
            for (int m = 0; m < 5; m++)
            {
                for (final byte[] frame : attacker.message(m, poison))
                {
                    harness.port(0).inject(frame);
                }
            }
            harness.runUntilIdle();
            harness.port(0).drainSent();
            final RingSimulation run = RingSimulation.lossless(harness, RING_7, 5, 77).run();
            for (int rank = 0; rank < 4; rank++)
            {
                for (int m = 0; m < 5; m++)
                {
                    assertThat(run.deliveredMessage(rank, m)).isEqualTo(run.expectedMessage(rank, m));
                }
            }
            assertThat(harness.counter(DataplaneCounter.DROP_SPOOFED)).isEqualTo(5);
        }
    }

    @Test
    void shouldNotAnswerANewJobOnTheSameConnectionsWithTheOldJobsStoredResults()
    {
        // A job ends with its last messages' aggregators still complete (nothing releases them); a second job on
        // the same QPs restarts at MsgID 0 with a new PSN sequence. Its first packets must not be taken for
        // retransmissions and answered with the first job's sums (valid ICRC, result tag: silently wrong).
        final RingDefinition ring = Rings.ring(6, 2, ElementType.FP32, 4, 3, 128);
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(ring);
            final RingWorker[] first = { RingWorker.of(ring, 0, 100), RingWorker.of(ring, 1, 9000) };
            for (int m = 0; m < 3; m++)
            {
                for (final RingWorker worker : first)
                {
                    worker.message(m, Gradients.random(ElementType.FP32, worker.gradientBytes(), new Random(m)))
                        .forEach(harness.port(0)::inject);
                }
            }
            assertThat(harness.runAndDrain(0)).hasSize(3 * 2 * 3);

            final RingWorker[] second = { RingWorker.of(ring, 0, 40_000), RingWorker.of(ring, 1, 70_000) };
            final byte[][] inputs = new byte[2][];
            for (int rank = 0; rank < 2; rank++)
            {
                inputs[rank] = Gradients.random(ElementType.FP32, second[rank].gradientBytes(), new Random(99 + rank));
                second[rank].message(0, inputs[rank]).forEach(harness.port(0)::inject);
            }
            // The new sequence starts a new run of the ring: the first job's kept results are discarded and the
            // second job's message 0 is aggregated afresh.
            final List<byte[]> results = harness.runAndDrain(0);
            assertThat(results).hasSize(2 * 3);
            final byte[] expected = Gradients.referenceSum(ElementType.FP32, inputs);
            final java.io.ByteArrayOutputStream connection0 = new java.io.ByteArrayOutputStream();
            final RoceFrame frame = new RoceFrame();
            for (final byte[] result : results)
            {
                frame.wrap(new UnsafeBuffer(result), 0, result.length);
                if (frame.destQp() == second[0].destQp())
                {
                    final int start = frame.payloadOffset() + (frame.psn() == 40_000 ? InaHeader.LENGTH : 0);
                    connection0.write(result, start, frame.payloadOffset() + frame.payloadLength() - start);
                }
            }
            assertThat(connection0.toByteArray()).isEqualTo(expected);
            assertThat(harness.counter(DataplaneCounter.AGGREGATIONS_COMPLETED)).isEqualTo(3 * 3 + 3);
            assertThat(harness.counter(DataplaneCounter.DUPLICATES_ANSWERED)).isZero();
        }
    }

    @Test
    void shouldDropFirstPacketsOnAnotherQpThanTheRegisteredOne()
    {
        final List<RingMember> members = new ArrayList<>();
        for (int r = 0; r < 2; r++)
        {
            members.add(new RingMember(r, Rings.address(r, false), 0x200 + r, RingMember.ANY_MAC));
        }
        final RingDefinition config = new RingDefinition(5, "qp", ElementType.INT32, 1, 1, 64, members);
        final RingDefinition wrongQp = Rings.ring(5, 2, ElementType.INT32, 1, 1, 64);
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            final RingWorker impostor = RingWorker.of(wrongQp, 0, 10);
            assertThat(harness.process(impostor.message(0, new byte[impostor.gradientBytes()]).getFirst())).isEmpty();
            assertThat(harness.counter(DataplaneCounter.DROP_SPOOFED)).isEqualTo(1);
        }
    }

    @Test
    void shouldPassNonRingTrafficThroughByteIdenticalAndInOrder() throws Exception
    {
        final List<byte[]> input = new ArrayList<>(TestPcap.frames(TestPcap.RXE_CAPTURE));
        input.add(1, arp());
        input.add(5, udp(false));
        input.add(9, new byte[]{ 1, 2, 3 });
        input.add(udpIpv6());
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(RING_7);
            input.forEach(harness.port(0)::inject);
            final List<byte[]> output = harness.runAndDrain(0);
            assertThat(output).hasSameSizeAs(input);
            for (int i = 0; i < input.size(); i++)
            {
                assertThat(output.get(i)).as("frame %d", i).isEqualTo(input.get(i));
            }
            assertThat(harness.counter(DataplaneCounter.PASS_THROUGH)).isEqualTo(input.size());
        }
    }

    @Test
    void shouldCompleteAPartialUdpChecksumBeforeForwarding()
    {
        final byte[] correct = udp(true);
        final byte[] partial = correct.clone();
        // What the kernel leaves for offload: the folded pseudo-header sum, not complemented.
        final int l3 = 14;
        long sum = 0;
        for (int i = 12; i < 20; i += 2)
        {
            sum += ((correct[l3 + i] & 0xFF) << 8) | (correct[l3 + i + 1] & 0xFF);
        }
        sum += 17 + (correct.length - 34);
        while ((sum >>> 16) != 0)
        {
            sum = (sum & 0xFFFF) + (sum >>> 16);
        }
        partial[34 + 6] = (byte)(sum >>> 8);
        partial[34 + 7] = (byte)sum;
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.port(0).inject(partial, FrameHandler.FLAG_CHECKSUM_NOT_READY);
            final List<byte[]> output = harness.runAndDrain(0);
            assertThat(output).hasSize(1);
            assertThat(output.getFirst()).isEqualTo(correct);
            assertThat(harness.counter(DataplaneCounter.PASS_THROUGH_CHECKSUM_COMPLETED)).isEqualTo(1);
        }
    }

    @Test
    void shouldDropRingPacketsWithBadIcrcOrWrongSizeWithoutChangingResults()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(RING_7);
            final RingWorker worker = RingWorker.of(RING_7, 1, 1000);
            final List<byte[]> frames = worker.message(0, new byte[worker.gradientBytes()]);
            final byte[] corrupt = frames.getFirst().clone();
            corrupt[corrupt.length - 20] ^= 1;
            assertThat(harness.process(corrupt)).isEmpty();
            assertThat(harness.counter(DataplaneCounter.DROP_BAD_ICRC)).isEqualTo(1);

            final RingDefinition wrongSize = Rings.ring(7, 4, ElementType.FP32, 2, 3, 256);
            final RingWorker big = RingWorker.of(wrongSize, 1, 1000);
            assertThat(harness.process(big.message(0, new byte[big.gradientBytes()]).getFirst())).isEmpty();
            assertThat(harness.counter(DataplaneCounter.DROP_WRONG_SIZE)).isEqualTo(1);
            assertThat(harness.counter(DataplaneCounter.RING_PACKETS)).isZero();
        }
    }

    @Test
    void shouldDropPacketsWhoseFirstPacketWasLost()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(RING_7);
            final RingWorker worker = RingWorker.of(RING_7, 0, 40);
            final List<byte[]> first = worker.message(0, new byte[worker.gradientBytes()]);
            final List<byte[]> second = worker.message(1, new byte[worker.gradientBytes()]);
            // Middle packet of a connection never seen: on a ring edge it must not pass through unaggregated.
            assertThat(harness.process(first.get(1))).isEmpty();
            assertThat(harness.counter(DataplaneCounter.DROP_UNKNOWN_CONNECTION)).isEqualTo(1);
            assertThat(harness.process(first.get(0))).isEmpty();
            // Message 1's first packet lost: its middle packet is PSN0 + MsgLen + 1 from message 0's PSN0.
            assertThat(harness.process(second.get(1))).isEmpty();
            assertThat(harness.counter(DataplaneCounter.DROP_FIRST_PACKET_LOST)).isEqualTo(1);
            assertThat(harness.counter(DataplaneCounter.RING_PACKETS)).isEqualTo(1);
        }
    }

    @Test
    void shouldRefuseARingThatDoesNotFitTheMemoryBudget()
    {
        final RingDefinition big = Rings.ring(1, 8, ElementType.FP32, 8, 100, 4096);
        try (DataplaneHarness harness = new DataplaneHarness(1, false, 32L << 20))
        {
            assertThatThrownBy(() -> harness.install(big))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("ring 1 does not fit the aggregator memory budget")
                .hasMessageContaining("1600 aggregators");
            final RingInstalled installed = harness.install(RING_7);
            assertThat(installed.memoryBytes()).isEqualTo(AggregatorRegion.bytesFor(4, 12, 128));
            assertThat(installed.aggregators()).isEqualTo(12);
            assertThat(installed.budgetUsedBytes()).isEqualTo(installed.memoryBytes());
            assertThatThrownBy(() -> harness.install(RING_7)).hasMessageContaining("already installed");
            assertThatThrownBy(() -> harness.install(Rings.ring(2, 4, ElementType.FP32, 3, 3, 128)))
                .hasMessageContaining("power of two");
        }
    }

    @Test
    void shouldPassARemovedRingsTrafficThroughAndForgetItsConnections()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(RING_7);
            final RingWorker worker = RingWorker.of(RING_7, 0, 40);
            final List<byte[]> frames = worker.message(0, new byte[worker.gradientBytes()]);
            assertThat(harness.process(frames.get(0))).isEmpty();
            assertThat(harness.await(harness.proxy().connections())).hasSize(1);
            final AggregatorUsage pending = harness.await(harness.proxy().occupancy(7, 5));
            assertThat(pending.incomplete()).isEqualTo(1);
            assertThat(pending.oldest().getFirst().missingRanks()).containsExactly(1, 2, 3);

            final RingRemoved removed = harness.await(harness.proxy().removeRing(7));
            assertThat(removed.connectionsRemoved()).isEqualTo(1);
            assertThat(harness.await(harness.proxy().connections())).isEmpty();
            for (final byte[] frame : frames)
            {
                assertThat(harness.process(frame)).singleElement().isEqualTo(frame);
            }
        }
    }

    @Test
    void shouldSendResultsOutOfThePeerPortInBumpInTheWireMode()
    {
        final RingDefinition config = Rings.ring(4, 2, ElementType.INT32, 1, 1, 64);
        try (DataplaneHarness harness = new DataplaneHarness(2, true, 1L << 24))
        {
            harness.install(config);
            for (int rank = 0; rank < 2; rank++)
            {
                final RingWorker worker = RingWorker.of(config, rank, 7);
                harness.port(rank).inject(worker.message(0, new byte[worker.gradientBytes()]).getFirst());
            }
            harness.port(0).inject(udp(true));
            harness.runUntilIdle();
            final List<byte[]> out0 = harness.port(0).drainSent();
            final List<byte[]> out1 = harness.port(1).drainSent();
            // rank 0 came in on port 0, rank 1 on port 1: each result leaves on the other port.
            assertThat(out1).hasSize(2);
            assertThat(out0).hasSize(1);
        }
    }

    @Test
    void shouldVerifyResultPacketsWithScapy() throws Exception
    {
        assumeTrue(ScapyIcrc.available(), "scapy not available");
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(RING_7);
            final RingSimulation run = RingSimulation.lossless(harness, RING_7, 3, 5).run();
            assertThat(ScapyIcrc.check(run.results()))
                .startsWith("checked " + run.results().size() + " mismatches 0").endsWith("exit 0");
        }
    }

    private static byte[] arp()
    {
        final byte[] frame = new byte[42];
        frame[12] = 0x08;
        frame[13] = 0x06;
        for (int i = 14; i < 42; i++)
        {
            frame[i] = (byte)i;
        }
        return frame;
    }

    /**
     * A UDP datagram 10.0.0.1 → 10.0.0.2 port 9999 (checksum computed when asked, else 0).
     */
    private static byte[] udp(final boolean checksum)
    {
        final byte[] frame = new byte[14 + 20 + 8 + 13];
        final UnsafeBuffer buffer = new UnsafeBuffer(frame);
        frame[12] = 0x08;
        io.netreduce.protocol.wire.Ipv4Header.write(buffer, 14, 0, 20 + 8 + 13, 1, 64, 17, 0x0A000001, 0x0A000002);
        UdpHeader.write(buffer, 34, 5555, 9999, 8 + 13);
        for (int i = 42; i < frame.length; i++)
        {
            frame[i] = (byte)(i * 7);
        }
        if (checksum)
        {
            L4Checksum.writeUdp(buffer, 14, 34);
        }
        return frame;
    }

    private static byte[] udpIpv6()
    {
        final byte[] frame = new byte[14 + 40 + 8 + 4];
        frame[12] = (byte)0x86;
        frame[13] = (byte)0xDD;
        final UnsafeBuffer buffer = new UnsafeBuffer(frame);
        final byte[] a = new byte[16];
        a[0] = (byte)0xFE;
        a[1] = (byte)0x80;
        io.netreduce.protocol.wire.Ipv6Header.write(buffer, 14, 0, 0, 12, 17, 255, a, a);
        UdpHeader.write(buffer, 54, 546, 547, 12);
        return frame;
    }
}
