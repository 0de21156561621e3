package io.netreduce.protocol.port;

import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.L4Checksum;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.wire.UdpHeader;
import io.netreduce.protocol.writer.RoceFrameWriter;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * UDP segmentation offload on {@link AfPacketPort} ({@link AfPacketConfiguration#withSegmentationOffload}) over a
 * real veth pair (MTU 9000) between two network namespaces, with real RoCEv2 frames from {@link RoceFrameWriter}:
 * runs of frames to one destination leave as one offload frame ({@link UdpSegmentBatcher}), veth carries it whole,
 * and a receiving port with offload splits it back ({@link UdpSegmentSplitter}); a receiver without offload gets
 * the kernel's own segments. Either way the frames handed over are the frames written. Needs root.
 */
class AfPacketSegmentationOffloadVethTest
{
    private static final int MTU = 9000;
    private static final int PAYLOAD = 4096;
    /** Ethernet + IPv4 + UDP: what every segment of a batch carries in front of its UDP payload. */
    private static final int HEADERS = EthernetHeader.LENGTH + Ipv4Header.MIN_LENGTH + UdpHeader.LENGTH;
    private static final int UDP_CHECKSUM_AT = EthernetHeader.LENGTH + Ipv4Header.MIN_LENGTH + UdpHeader.CHECKSUM_OFFSET;

    /** The test frames' source MACs all start 02:00:00:00:00; anything else on the link is ignored. */
    private static final long SOURCE_MAC = 0x0200_0000_00A0L;
    private static final long OTHER_SOURCE_MAC = 0x0200_0000_00A1L;
    private static final long DESTINATION_1 = 0x0200_0000_0101L;
    private static final long DESTINATION_2 = 0x0200_0000_0102L;

    private static VethPair veth;

    private final List<AfPacketPort> ports = new ArrayList<>();
    private final UnsafeBuffer scratch = new UnsafeBuffer(new byte[MTU + 128]);
    private final UnsafeBuffer payload = new UnsafeBuffer(new byte[PAYLOAD]);
    private final Random random = new Random(4791);

    @BeforeAll
    static void createNamespaces()
    {
        assumeTrue(VethPair.isRoot(), "needs root for network namespaces and AF_PACKET");
        veth = new VethPair("g", MTU);
    }

    @AfterAll
    static void deleteNamespaces()
    {
        if (null != veth)
        {
            veth.close();
        }
    }

    @AfterEach
    void closePorts()
    {
        ports.forEach(AfPacketPort::close);
        ports.clear();
    }

    /**
     * Two connections' messages of 50 packets each (SEND with a short last packet; RDMA WRITE, whose first packet
     * carries a RETH and so a longer UDP payload than its middles), interleaved packet by packet to two MACs.
     * Batches: to destination 1, 15 + 15 + 15 + 5 (15 segments of 4112 bytes is the most one IPv4 datagram
     * holds; the short SEND_LAST ends the last batch); to destination 2, 2 (WRITE_FIRST and the first, shorter,
     * WRITE_MIDDLE, which as a short segment ends it) + 15 + 15 + 15 + 3. Nine offload frames in all, each split
     * back by the receiver, with either kind of receive ring.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(RxRingVersion.class)
    void shouldDeliverEveryFrameBitForBitWhenBatchedAcrossVeth(final RxRingVersion version)
    {
        final AfPacketPort sender = open(veth.namespaceA, VethPair.DEVICE_A, true);
        final AfPacketPort receiver = open(veth.namespaceB, AfPacketConfiguration.defaults(VethPair.DEVICE_B)
            .withRxRingVersion(version).withSegmentationOffload(true));
        final RoceFrameWriter toFirst = writer(DESTINATION_1, 0x0A4D_0101, 0xC001, 0x101);
        final RoceFrameWriter toSecond = writer(DESTINATION_2, 0x0A4D_0102, 0xC002, 0x102);
        toSecond.reth(0x7000_0000L, 0x55, 50 * PAYLOAD);

        final List<byte[]> sent = new ArrayList<>();
        for (int i = 0; i < 50; i++)
        {
            final int send = i == 0 ? Opcode.SEND_FIRST : i == 49 ? Opcode.SEND_LAST : Opcode.SEND_MIDDLE;
            final int write = i == 0 ? Opcode.RDMA_WRITE_FIRST : i == 49 ? Opcode.RDMA_WRITE_LAST :
                Opcode.RDMA_WRITE_MIDDLE;
            sent.add(write(toFirst, send, 1000 + i, i == 49 ? 1000 : PAYLOAD));
            sent.add(write(toSecond, write, 5000 + i, i == 49 ? 1000 : PAYLOAD));
        }

        send(sender, sent);
        final List<Received> received = receive(receiver, sent.size());

        assertDeliveredUnchangedInOrderPerDestination(sent, received);
        final long bytes = sent.stream().mapToLong(frame -> frame.length).sum();
        assertThat(sender.counters().txFrames()).isEqualTo(sent.size());
        assertThat(sender.counters().txBytes()).isEqualTo(bytes);
        assertThat(sender.counters().txErrors()).isZero();
        assertThat(sender.counters().get(PortCounters.TX_GSO_FRAMES)).isEqualTo(9);
        assertThat(receiver.counters().get(PortCounters.RX_GSO_FRAMES)).isEqualTo(9);
        assertThat(receiver.counters().get(PortCounters.RX_GSO_UNSUPPORTED)).isZero();
        assertThat(receiver.counters().rxFrames()).isEqualTo(sent.size());
        assertThat(receiver.counters().rxBytes()).isEqualTo(bytes);
        assertThat(receiver.counters().rxTruncated()).isZero();
        receiver.refreshKernelStatistics();
        assertThat(receiver.counters().rxDropped()).isZero();
    }

    /**
     * To destination 1, between the data packets of one connection: another connection's ACK to the same MAC, a
     * packet missing from the sequence (its IPv4 identification skips one) and a retransmission of an earlier
     * packet. Each ends the open batch and leaves in its place. Interleaved with them, destination 2's packets all
     * join one batch, undisturbed by what happens to destination 1's.
     * Batches: {d0 d1} ACK {d2 d3 d4} {d6 d7} R(d1) {d8 d9}, and the eleven to destination 2.
     */
    @ParameterizedTest(name = "claimed in place: {0}")
    @ValueSource(booleans = {false, true})
    void shouldKeepPerDestinationOrderWhenFramesCannotJoinTheOpenBatch(final boolean inPlace)
    {
        final AfPacketPort sender = open(veth.namespaceA, VethPair.DEVICE_A, true);
        final AfPacketPort receiver = open(veth.namespaceB, VethPair.DEVICE_B, true);
        final RoceFrameWriter data = writer(DESTINATION_1, 0x0A4D_0101, 0xC001, 0x101);
        final RoceFrameWriter acks = new RoceFrameWriter().macs(OTHER_SOURCE_MAC, DESTINATION_1)
            .ipv4(0x0A4D_0002, 0x0A4D_0201).udpSrcPort(0xC0AC).destQp(0x201).aeth(0, 7);
        final RoceFrameWriter other = writer(DESTINATION_2, 0x0A4D_0102, 0xC002, 0x102);

        final List<byte[]> toFirst = new ArrayList<>();
        final byte[] d0 = write(data, Opcode.SEND_MIDDLE, 0, PAYLOAD);
        final byte[] d1 = write(data, Opcode.SEND_MIDDLE, 1, PAYLOAD);
        toFirst.add(d0);
        toFirst.add(d1);
        toFirst.add(write(acks, Opcode.ACKNOWLEDGE, 77, 0));
        for (int psn = 2; psn <= 4; psn++)
        {
            toFirst.add(write(data, Opcode.SEND_MIDDLE, psn, PAYLOAD));
        }
        write(data, Opcode.SEND_MIDDLE, 5, PAYLOAD); // lost before the port: d6 is out of sequence
        toFirst.add(write(data, Opcode.SEND_MIDDLE, 6, PAYLOAD));
        toFirst.add(write(data, Opcode.SEND_MIDDLE, 7, PAYLOAD));
        toFirst.add(d1.clone()); // retransmitted
        toFirst.add(write(data, Opcode.SEND_MIDDLE, 8, PAYLOAD));
        toFirst.add(write(data, Opcode.SEND_MIDDLE, 9, PAYLOAD));

        final List<byte[]> sent = new ArrayList<>();
        for (int i = 0; i < toFirst.size(); i++)
        {
            sent.add(toFirst.get(i));
            sent.add(write(other, Opcode.SEND_MIDDLE, 100 + i, PAYLOAD));
        }

        if (inPlace)
        {
            sendClaimedInPlace(sender, sent);
        }
        else
        {
            send(sender, sent);
        }
        final List<Received> received = receive(receiver, sent.size());

        assertDeliveredUnchangedInOrderPerDestination(sent, received);
        assertThat(sender.counters().txFrames()).isEqualTo(sent.size());
        assertThat(sender.counters().get(PortCounters.TX_GSO_FRAMES)).as("4 to destination 1, 1 to destination 2")
            .isEqualTo(5);
        assertThat(receiver.counters().get(PortCounters.RX_GSO_FRAMES)).isEqualTo(5);
        assertThat(receiver.counters().rxFrames()).isEqualTo(sent.size());
    }

    /**
     * Two connections between the same two hosts and UDP ports (two jobs' ranks on the same workers, the appliance
     * sending their results in turn), one IPv4 identification sequence across both: each connection's run is a
     * batch of its own, never one batch across both (a receiving endpoint's socket filter reads the first segment's
     * destination QP only).
     */
    @Test
    void shouldNotBatchTwoQueuePairsFramesTogetherEvenWithConsecutiveIdentifications()
    {
        final AfPacketPort sender = open(veth.namespaceA, VethPair.DEVICE_A, true);
        final AfPacketPort receiver = open(veth.namespaceB, VethPair.DEVICE_B, true);
        final RoceFrameWriter both = writer(DESTINATION_1, 0x0A4D_0101, 0xC001, 0x101);
        final List<byte[]> sent = new ArrayList<>();
        for (final int qp : new int[] {0x101, 0x201})
        {
            both.destQp(qp);
            for (int psn = 0; psn < 3; psn++)
            {
                sent.add(write(both, Opcode.SEND_MIDDLE, psn, PAYLOAD));
            }
        }
        send(sender, sent);
        final List<Received> received = receive(receiver, sent.size());

        assertDeliveredUnchangedInOrderPerDestination(sent, received);
        assertThat(sender.counters().get(PortCounters.TX_GSO_FRAMES)).as("a batch per queue pair").isEqualTo(2);
        assertThat(receiver.counters().get(PortCounters.RX_GSO_FRAMES)).isEqualTo(2);
    }

    /**
     * With UDP segmentation off on the sender's veth the kernel segments each offload frame in software, and a
     * receiver without offload gets its segments: the frames written, but for the UDP checksum, which the kernel
     * fills in. With checksum offload on (veth's default) it leaves the segments' checksums for offload, as the
     * pseudo-header sum, flagged not ready; with checksum offload off too it computes them.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({
        "'tx-udp-segmentation off', true",
        "'tx off tx-udp-segmentation off', false"})
    void shouldGetTheSameFramesBackFromTheKernelsOwnSegmentation(final String features, final boolean partial)
    {
        final AfPacketPort sender = open(veth.namespaceA, VethPair.DEVICE_A, true);
        final AfPacketPort receiver = open(veth.namespaceB, VethPair.DEVICE_B, false);
        final RoceFrameWriter toFirst = writer(DESTINATION_1, 0x0A4D_0101, 0xC001, 0x101);
        final RoceFrameWriter toSecond = writer(DESTINATION_2, 0x0A4D_0102, 0xC002, 0x102);
        final List<byte[]> sent = new ArrayList<>();
        for (int i = 0; i < 40; i++)
        {
            sent.add(write(toFirst, i == 39 ? Opcode.SEND_LAST : Opcode.SEND_MIDDLE, i, i == 39 ? 1500 : PAYLOAD));
            sent.add(write(toSecond, Opcode.SEND_MIDDLE, 500 + i, PAYLOAD));
        }

        ethtool(features.split(" "));
        final List<Received> received;
        try
        {
            assertThat(VethPair.run("ip", "netns", "exec", veth.namespaceA, "ethtool", "-k", VethPair.DEVICE_A))
                .contains("tx-udp-segmentation: off");
            send(sender, sent);
            received = receive(receiver, sent.size());
        }
        finally
        {
            ethtool("tx", "on", "tx-udp-segmentation", "on");
        }

        final RoceFrame frame = new RoceFrame();
        final Icrc icrc = new Icrc();
        final List<byte[]> checksumsZeroed = new ArrayList<>();
        for (final Received r : received)
        {
            final UnsafeBuffer buffer = new UnsafeBuffer(r.frame);
            assertThat(frame.wrap(buffer, 0, r.frame.length)).isEqualTo(RoceFrame.OK);
            assertThat(icrc.verify(frame)).as("ICRC").isTrue();
            assertThat(UdpHeader.checksum(buffer, frame.udpOffset())).as("UDP checksum filled in").isNotZero();
            if (partial)
            {
                assertThat(r.flags).isEqualTo(FrameHandler.FLAG_CHECKSUM_NOT_READY);
                assertThat(L4Checksum.completePartial(buffer, 0, r.frame.length)).isTrue();
            }
            else
            {
                assertThat(r.flags).isZero();
            }
            assertThat(L4Checksum.verifyUdp(buffer, frame.l3Offset(), frame.udpOffset())).as("UDP checksum").isTrue();
            checksumsZeroed.add(zeroUdpChecksum(r.frame));
        }
        for (final long destination : new long[] {DESTINATION_1, DESTINATION_2})
        {
            assertThat(perDestination(checksumsZeroed, destination)).as("frames to %012x", destination)
                .containsExactlyElementsOf(perDestination(sent, destination));
        }
        assertThat(sender.counters().txFrames()).isEqualTo(sent.size());
        assertThat(sender.counters().get(PortCounters.TX_GSO_FRAMES)).isPositive();
        assertThat(receiver.counters().get(PortCounters.RX_GSO_FRAMES)).isZero();
        assertThat(receiver.counters().rxFrames()).isEqualTo(sent.size());
        assertThat(receiver.counters().rxTruncated()).isZero();
    }

    /**
     * Frames the kernel's segmentation would not give back bit for bit leave alone and arrive unchanged: IPv6
     * ones, and IPv4 ones with a UDP checksum, which also end the batch open to their destination.
     * To destination 1 (one connection, identifications consecutive): {f0 f1} f2(checksum) {f3 f4} f5(checksum)
     * f6; to destination 2, IPv6 only: five frames alone.
     */
    @Test
    void shouldSendAFrameThatIsNotEligibleAloneAndDeliverItUnchanged()
    {
        final AfPacketPort sender = open(veth.namespaceA, VethPair.DEVICE_A, true);
        final AfPacketPort receiver = open(veth.namespaceB, VethPair.DEVICE_B, true);
        final RoceFrameWriter v4 = writer(DESTINATION_1, 0x0A4D_0101, 0xC001, 0x101);
        final RoceFrameWriter v6 = new RoceFrameWriter().macs(SOURCE_MAC, DESTINATION_2)
            .ipv6(InetAddress.ofLiteral("fd00::a").getAddress(), InetAddress.ofLiteral("fd00::102").getAddress())
            .udpSrcPort(0xC006).destQp(0x106);

        final List<byte[]> sent = new ArrayList<>();
        for (int i = 0; i < 7; i++)
        {
            final byte[] frame = write(v4, Opcode.SEND_MIDDLE, i, PAYLOAD);
            if (i == 2 || i == 5)
            {
                final UnsafeBuffer buffer = new UnsafeBuffer(frame);
                L4Checksum.writeUdp(buffer, EthernetHeader.LENGTH, EthernetHeader.LENGTH + Ipv4Header.MIN_LENGTH);
                assertThat(UdpHeader.checksum(buffer, EthernetHeader.LENGTH + Ipv4Header.MIN_LENGTH)).isNotZero();
            }
            sent.add(frame);
            if (i < 5)
            {
                sent.add(write(v6, Opcode.SEND_MIDDLE, 50 + i, PAYLOAD));
            }
        }

        send(sender, sent);
        final List<Received> received = receive(receiver, sent.size());

        assertDeliveredUnchangedInOrderPerDestination(sent, received);
        assertThat(sender.counters().txFrames()).isEqualTo(sent.size());
        assertThat(sender.counters().get(PortCounters.TX_GSO_FRAMES)).as("{f0 f1} and {f3 f4}").isEqualTo(2);
        assertThat(receiver.counters().get(PortCounters.RX_GSO_FRAMES)).isEqualTo(2);
        assertThat(receiver.counters().rxFrames()).isEqualTo(sent.size());
    }

    /**
     * Transmit slots smaller than a 64 KiB batch (the ring set after the offload was turned on): a batch grows
     * only as far as its slot holds, two frames of 4154 bytes in a 9248-byte slot, never into the next slot.
     */
    @Test
    void shouldKeepEveryBatchWithinItsTransmitSlotWhenTheSlotsAreSmall()
    {
        final AfPacketConfiguration small = AfPacketConfiguration.defaults(VethPair.DEVICE_A)
            .withSegmentationOffload(true)
            .withTxRing(AfPacketConfiguration.JUMBO_TX_FRAME_SIZE, 64);
        final AfPacketPort sender = open(veth.namespaceA, small);
        final AfPacketPort receiver = open(veth.namespaceB, VethPair.DEVICE_B, true);
        final RoceFrameWriter toFirst = writer(DESTINATION_1, 0x0A4D_0101, 0xC001, 0x101);
        final RoceFrameWriter toSecond = writer(DESTINATION_2, 0x0A4D_0102, 0xC002, 0x102);
        final List<byte[]> sent = new ArrayList<>();
        for (int i = 0; i < 30; i++)
        {
            sent.add(write(toFirst, Opcode.SEND_MIDDLE, i, PAYLOAD));
            sent.add(write(toSecond, Opcode.SEND_MIDDLE, 100 + i, PAYLOAD));
        }

        send(sender, sent);
        final List<Received> received = receive(receiver, sent.size());

        assertDeliveredUnchangedInOrderPerDestination(sent, received);
        assertThat(sender.counters().txFrames()).isEqualTo(sent.size());
        assertThat(sender.counters().get(PortCounters.TX_GSO_FRAMES)).as("15 batches of two per destination")
            .isEqualTo(30);
    }

    /**
     * A shaped link keeps a window in its qdisc, and the kernel charges every frame it has taken from the ring but
     * not yet sent to the transmit socket's buffer. With the kernel's default buffer (208 KiB) one kick hands over
     * a fifth of a 1 MiB window and the kernel refuses the rest (EAGAIN), which stays in the ring to be kicked again
     * while the link drains; with a buffer the size of the window the first kick hands over all of it.
     */
    @ParameterizedTest(name = "txSocketBuffer {0}")
    @CsvSource({"0, true", "1048576, false"})
    void shouldHandAWholeWindowToAShapedLinkAtOneKickOnlyWhenTheSocketBufferHoldsIt(
        final int socketBuffer, final boolean leftInRing)
    {
        // 100 Mbit/s with 500 ms of queue: the qdisc holds the whole window (6 MB) and sends little of it meanwhile.
        VethPair.run("ip", "netns", "exec", veth.namespaceA, "tc", "qdisc", "replace", "dev", VethPair.DEVICE_A,
            "root", "tbf", "rate", "100mbit", "burst", "64kb", "latency", "500ms");
        try
        {
            final AfPacketPort sender = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A)
                .withSegmentationOffload(true)
                .withTxRing(AfPacketConfiguration.SEGMENTATION_TX_FRAME_SIZE, 64)
                .withTxSocketBuffer(socketBuffer));
            final RoceFrameWriter writer = writer(DESTINATION_1, 0x0A4D_0101, 0xC001, 0x101);
            final int frames = 256;
            for (int i = 0; i < frames; i++)
            {
                final byte[] frame = write(writer, Opcode.SEND_MIDDLE, 1000 + i, PAYLOAD);
                assertThat(sender.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
            }

            final int taken = sender.flush();

            assertThat(sender.hasPendingTransmit()).isEqualTo(leftInRing);
            assertThat(sender.counters().get(PortCounters.TX_KICKS_REFUSED)).isEqualTo(leftInRing ? 1 : 0);
            if (leftInRing)
            {
                assertThat(taken).isLessThan(frames / 2);
            }
            else
            {
                assertThat(taken).isEqualTo(frames);
                // The kernel keeps twice the value set, for its bookkeeping.
                assertThat(sender.transmitSocketBuffer()).isEqualTo(2 * socketBuffer);
            }
            assertThat(sender.counters().txErrors()).isZero();
        }
        finally
        {
            VethPair.run("ip", "netns", "exec", veth.namespaceA, "tc", "qdisc", "del", "dev", VethPair.DEVICE_A,
                "root");
        }
    }

    /**
     * Frames the kernel refused for want of room in the socket's buffer stay in the ring; the poller then waits on
     * the transmit socket until the link has drained enough of the qdisc, instead of returning at once for the
     * owner to kick, be refused and kick again (the loop an appliance ran 250,000 times a second). A whole window
     * crosses a 100 Mbit/s link in a few dozen kicks, each after a wait, and every frame is taken.
     */
    @Test
    void shouldWaitForRoomInTheSocketBufferInsteadOfKickingARefusedRingAgainAtOnce()
    {
        VethPair.run("ip", "netns", "exec", veth.namespaceA, "tc", "qdisc", "replace", "dev", VethPair.DEVICE_A,
            "root", "tbf", "rate", "100mbit", "burst", "64kb", "latency", "500ms");
        try (PortPoller poller = new PortPoller(List.of(open(veth.namespaceA,
            AfPacketConfiguration.defaults(VethPair.DEVICE_A).withSegmentationOffload(true)
                .withTxRing(AfPacketConfiguration.SEGMENTATION_TX_FRAME_SIZE, 64)))))
        {
            final AfPacketPort sender = ports.getLast();
            final RoceFrameWriter writer = writer(DESTINATION_1, 0x0A4D_0101, 0xC001, 0x101);
            final int frames = 256;
            for (int i = 0; i < frames; i++)
            {
                final byte[] frame = write(writer, Opcode.SEND_MIDDLE, 1000 + i, PAYLOAD);
                assertThat(sender.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
            }

            int taken = sender.flush();
            assertThat(sender.hasPendingTransmit()).as("the default buffer refused most of the window").isTrue();
            assertThat(sender.counters().get(PortCounters.TX_KICKS_REFUSED)).isEqualTo(1);
            int kicks = 1;
            int waitsWithRoom = 0;
            final long deadline = System.nanoTime() + 5_000_000_000L;
            while (sender.hasPendingTransmit() && System.nanoTime() < deadline)
            {
                final long start = System.nanoTime();
                waitsWithRoom += poller.await(1_000) ? 1 : 0;
                assertThat(System.nanoTime() - start).as("a wait that ended before the link sent anything")
                    .isGreaterThan(100_000L);
                taken += sender.flush();
                kicks++;
            }

            assertThat(taken).isEqualTo(frames);
            assertThat(sender.hasPendingTransmit()).isFalse();
            assertThat(kicks).as("each kick after the kernel made room").isLessThan(64);
            assertThat(waitsWithRoom).isEqualTo(kicks - 1);
            assertThat(sender.counters().get(PortCounters.TX_KICKS_REFUSED)).as("every kick but the last")
                .isEqualTo(kicks - 1);
            assertThat(sender.counters().txErrors()).isZero();
        }
        finally
        {
            VethPair.run("ip", "netns", "exec", veth.namespaceA, "tc", "qdisc", "del", "dev", VethPair.DEVICE_A,
                "root");
        }
    }

    private record Received(byte[] frame, int flags)
    {
    }

    private RoceFrameWriter writer(final long destination, final int dstIp, final int udpSrcPort, final int qp)
    {
        return new RoceFrameWriter().macs(SOURCE_MAC, destination).ipv4(0x0A4D_0001, dstIp)
            .udpSrcPort(udpSrcPort).destQp(qp);
    }

    /**
     * @return a copy of one frame written by {@code writer}, with a random payload.
     */
    private byte[] write(final RoceFrameWriter writer, final int opcode, final int psn, final int payloadLength)
    {
        final byte[] bytes = new byte[payloadLength];
        random.nextBytes(bytes);
        payload.putBytes(0, bytes);
        final int length = writer.write(scratch, 0, opcode, psn, false, payload, 0, payloadLength);
        final byte[] frame = new byte[length];
        scratch.getBytes(0, frame);
        return frame;
    }

    private AfPacketPort open(final String namespace, final String device, final boolean offload)
    {
        return open(namespace, AfPacketConfiguration.defaults(device)
            .withTxRing(AfPacketConfiguration.JUMBO_TX_FRAME_SIZE, 256)
            .withSegmentationOffload(offload));
    }

    private AfPacketPort open(final String namespace, final AfPacketConfiguration configuration)
    {
        final AfPacketPort port = NetworkNamespace.callIn(namespace, () -> AfPacketPort.open(configuration));
        ports.add(port);
        assertThat(port.mtu()).isEqualTo(MTU);
        return port;
    }

    private static void ethtool(final String... features)
    {
        final List<String> command = new ArrayList<>(
            List.of("ip", "netns", "exec", veth.namespaceA, "ethtool", "-K", VethPair.DEVICE_A));
        command.addAll(List.of(features));
        VethPair.run(command.toArray(String[]::new));
    }

    /**
     * Commit every frame (flushing only when the ring is full, so runs stay together), then flush until the kernel
     * has taken them all.
     */
    /**
     * A claim that names its destination lands right behind the payloads of that destination's open batch (its
     * headers over their last bytes, put back on commit), and a plain claim, or one to a destination with no batch
     * open, in the next free slot.
     */
    @Test
    void shouldPlaceAClaimToADestinationWithAnOpenBatchBehindThatBatchsPayloads()
    {
        final AfPacketPort sender = open(veth.namespaceA, VethPair.DEVICE_A, true);
        final RoceFrameWriter data = writer(DESTINATION_1, 0x0A4D_0101, 0xC001, 0x101);
        final byte[] first = write(data, Opcode.SEND_MIDDLE, 0, PAYLOAD);
        final byte[] second = write(data, Opcode.SEND_MIDDLE, 1, PAYLOAD);

        final int firstAt = sender.tryClaim(first.length, DESTINATION_1);
        sender.claimBuffer().putBytes(firstAt, first);
        sender.commit();
        final int slotAt = sender.tryClaim(second.length);
        final int otherAt = sender.tryClaim(second.length, DESTINATION_2);
        final int secondAt = sender.tryClaim(second.length, DESTINATION_1);

        assertThat(otherAt).isEqualTo(slotAt).isNotEqualTo(firstAt);
        assertThat(secondAt).isEqualTo(firstAt + first.length - HEADERS);
        sender.claimBuffer().putBytes(secondAt, second);
        sender.commit();
        final byte[] batch = new byte[first.length + second.length - HEADERS];
        sender.claimBuffer().getBytes(firstAt, batch);
        assertThat(Arrays.copyOfRange(batch, HEADERS, first.length)).as("the first payload, its tail put back")
            .isEqualTo(Arrays.copyOfRange(first, HEADERS, first.length));
        assertThat(Arrays.copyOfRange(batch, first.length, batch.length))
            .isEqualTo(Arrays.copyOfRange(second, HEADERS, second.length));
        assertThat(sender.flush()).isEqualTo(2);
        assertThat(sender.counters().get(PortCounters.TX_GSO_FRAMES)).isEqualTo(1);
    }

    /**
     * Both rings are seen through direct ByteBuffers, which {@link java.util.zip.CRC32} reads in place: over a bare
     * address {@link Icrc} copied every payload into a heap chunk before checking or writing an ICRC.
     */
    @Test
    void shouldHandOutBothRingsAsDirectByteBuffersSoTheIcrcIsComputedInPlace()
    {
        final AfPacketPort sender = open(veth.namespaceA, VethPair.DEVICE_A, true);
        final AfPacketPort receiver = open(veth.namespaceB, VethPair.DEVICE_B, true);
        final byte[] frame = write(writer(DESTINATION_1, 0x0A4D_0101, 0xC001, 0x101), Opcode.SEND_ONLY, 0, PAYLOAD);

        assertThat(sender.tryClaim(frame.length)).isNotNegative();
        assertThat(sender.claimBuffer().byteBuffer()).isNotNull().matches(java.nio.ByteBuffer::isDirect);
        sendClaimedInPlace(sender, List.of(frame));
        final List<java.nio.ByteBuffer> seen = new ArrayList<>();
        PacketPortVethContract.awaitCondition(() ->
        {
            receiver.receive((buffer, offset, length, flags) -> seen.add(buffer.byteBuffer()), 16);
            return !seen.isEmpty();
        });
        assertThat(seen).allSatisfy(view -> assertThat(view).isNotNull().matches(java.nio.ByteBuffer::isDirect));
    }

    /**
     * {@link #send} through claims that name each frame's destination ({@link PacketPort#tryClaim(int, long)}).
     */
    private static void sendClaimedInPlace(final AfPacketPort port, final List<byte[]> frames)
    {
        final long deadline = System.nanoTime() + 5_000_000_000L;
        for (final byte[] frame : frames)
        {
            long destination = 0;
            for (int i = 0; i < 6; i++)
            {
                destination = destination << 8 | (frame[i] & 0xFF);
            }
            int index;
            while ((index = port.tryClaim(frame.length, destination)) < 0)
            {
                port.flush();
                assertThat(System.nanoTime()).as("transmit ring still full").isLessThan(deadline);
            }
            port.claimBuffer().putBytes(index, frame);
            port.commit();
        }
        PacketPortVethContract.awaitCondition(() ->
        {
            port.flush();
            return port.counters().txFrames() >= frames.size();
        });
    }

    private static void send(final AfPacketPort port, final List<byte[]> frames)
    {
        final long deadline = System.nanoTime() + 5_000_000_000L;
        for (final byte[] frame : frames)
        {
            assertThat(frame.length).isLessThanOrEqualTo(port.maxTxFrameLength());
            while (!port.send(new UnsafeBuffer(frame), 0, frame.length))
            {
                port.flush();
                assertThat(System.nanoTime()).as("transmit ring still full").isLessThan(deadline);
            }
        }
        PacketPortVethContract.awaitCondition(() ->
        {
            port.flush();
            return port.counters().txFrames() >= frames.size();
        });
    }

    /**
     * Receive the test frames until {@code expected} arrived (5 s at most), then a little longer so that a frame
     * delivered twice would show.
     */
    private static List<Received> receive(final AfPacketPort port, final int expected)
    {
        final List<Received> received = new ArrayList<>();
        final FrameHandler collect = (buffer, offset, length, flags) ->
        {
            if (length >= HEADERS && (EthernetHeader.srcMac(buffer, offset) >>> 8) == SOURCE_MAC >>> 8)
            {
                final byte[] frame = new byte[length];
                buffer.getBytes(offset, frame);
                received.add(new Received(frame, flags));
            }
        };
        final long deadline = System.nanoTime() + 5_000_000_000L;
        long settle = Long.MAX_VALUE;
        while (System.nanoTime() < Math.min(deadline, settle))
        {
            port.receive(collect, 256);
            if (settle == Long.MAX_VALUE && received.size() >= expected)
            {
                settle = System.nanoTime() + 50_000_000L;
            }
        }
        assertThat(received).as("test frames received").hasSize(expected);
        return received;
    }

    private static void assertDeliveredUnchangedInOrderPerDestination(final List<byte[]> sent, final List<Received> received)
    {
        final RoceFrame frame = new RoceFrame();
        final Icrc icrc = new Icrc();
        for (final Received r : received)
        {
            assertThat(r.flags).as("flags").isZero();
            assertThat(frame.wrap(new UnsafeBuffer(r.frame), 0, r.frame.length)).isEqualTo(RoceFrame.OK);
            assertThat(icrc.verify(frame)).as("ICRC").isTrue();
        }
        final List<byte[]> frames = received.stream().map(Received::frame).toList();
        for (final long destination : new long[] {DESTINATION_1, DESTINATION_2})
        {
            final List<byte[]> expected = perDestination(sent, destination);
            final List<byte[]> actual = perDestination(frames, destination);
            assertThat(actual).as("frames to %012x", destination).hasSameSizeAs(expected);
            for (int i = 0; i < expected.size(); i++)
            {
                assertThat(actual.get(i)).as("frame %d to %012x", i, destination).isEqualTo(expected.get(i));
            }
        }
        assertThat(frames).hasSameSizeAs(sent);
    }

    private static List<byte[]> perDestination(final List<byte[]> frames, final long destination)
    {
        return frames.stream().filter(frame -> EthernetHeader.dstMac(new UnsafeBuffer(frame), 0) == destination)
            .toList();
    }

    private static byte[] zeroUdpChecksum(final byte[] frame)
    {
        final byte[] copy = Arrays.copyOf(frame, frame.length);
        copy[UDP_CHECKSUM_AT] = 0;
        copy[UDP_CHECKSUM_AT + 1] = 0;
        return copy;
    }
}
