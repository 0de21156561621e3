package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The {@link PacketPortVethContract} for {@link AfPacketPort}, and its own behaviour over a real veth pair between
 * two network namespaces, receive-side tests once per {@link RxRingVersion}. Needs root; skipped otherwise.
 */
class AfPacketPortVethTest extends PacketPortVethContract
{
    /** How soon a lone frame must reach a V2 ring's reader: far below any V3 block timer used here. */
    private static final long PROMPT_DELIVERY_NS = 50_000_000L;
    /** A V3 block timeout long enough that a frame waiting for it is unmistakable. */
    private static final int SLOW_BLOCK_TIMEOUT_MS = 1000;

    @Override
    String namespaceTag()
    {
        return "p";
    }

    @Override
    PacketPort openPort(final String namespace, final String device)
    {
        return open(namespace, AfPacketConfiguration.defaults(device)
            .withTxRing(AfPacketConfiguration.JUMBO_TX_FRAME_SIZE, 256));
    }

    @Override
    PacketPort openPortWithTransmitSlots(final String namespace, final String device, final int slots)
    {
        return open(namespace, AfPacketConfiguration.defaults(device).withTxRing(2048, slots));
    }

    @Override
    PacketPort openPortWithTinyReceiveRing(final String namespace, final String device)
    {
        // Two 4 KiB blocks of two 2 KiB slots.
        return open(namespace, AfPacketConfiguration.defaults(device).withRxRing(4096, 2, 1).withRxFrameSize(2048));
    }

    @Override
    int tinyReceiveRingFrames()
    {
        return 6;
    }

    @Override
    int maxTxFrameLength(final PacketPort port)
    {
        return ((AfPacketPort)port).maxTxFrameLength();
    }

    @Override
    void refreshKernelStatistics(final PacketPort port)
    {
        ((AfPacketPort)port).refreshKernelStatistics();
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(RxRingVersion.class)
    void shouldCarryAMixedSizeBatchByteIdenticalAndInOrder(final RxRingVersion version)
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A)
            .withTxRing(AfPacketConfiguration.JUMBO_TX_FRAME_SIZE, 256));
        final AfPacketPort b = open(veth.namespaceB, receiver(version));
        assertThat(a.mtu()).isEqualTo(JUMBO_MTU);
        assertThat(a.maxTxFrameLength()).isGreaterThanOrEqualTo(JUMBO_FRAME);

        final Random random = new Random(42);
        final List<byte[]> sent = new ArrayList<>();
        long sentBytes = 0;
        for (int i = 0; i < 1000; i++)
        {
            final int length = i % 50 == 7 ? JUMBO_FRAME : 60 + random.nextInt(1514 - 60 + 1);
            final byte[] frame = testFrame(i, length, random);
            sent.add(frame);
            sentBytes += length;
        }
        sent.set(0, testFrame(0, 60, random));
        sent.set(1, testFrame(1, 1514, random));
        sentBytes = sent.stream().mapToLong(f -> f.length).sum();

        final List<byte[]> received = new ArrayList<>();
        final FrameHandler collect = collectTestFrames(received);
        for (final byte[] frame : sent)
        {
            final UnsafeBuffer buffer = new UnsafeBuffer(frame);
            while (!a.send(buffer, 0, frame.length))
            {
                a.flush();
                b.receive(collect, 256);
            }
        }
        while (a.counters().txFrames() < sent.size())
        {
            a.flush();
        }
        awaitCondition(() ->
        {
            b.receive(collect, 256);
            return received.size() >= sent.size();
        });

        assertThat(received).hasSize(sent.size());
        for (int i = 0; i < sent.size(); i++)
        {
            assertThat(received.get(i)).as("frame %d", i).isEqualTo(sent.get(i));
        }
        assertThat(a.counters().txFrames()).isEqualTo(1000);
        assertThat(a.counters().txBytes()).isEqualTo(sentBytes);
        assertThat(a.counters().txErrors()).isZero();
        assertThat(b.counters().rxFrames()).isEqualTo(1000);
        assertThat(b.counters().rxBytes()).isEqualTo(sentBytes);
        assertThat(b.counters().rxTruncated()).isZero();
        b.refreshKernelStatistics();
        assertThat(b.counters().rxDropped()).isZero();
    }

    @Test
    void shouldReportTheInterfaceMacAddressAndMtu()
    {
        final AfPacketPort b = open(veth.namespaceB, AfPacketConfiguration.defaults(VethPair.DEVICE_B));
        final String link = VethPair.run("ip", "-n", veth.namespaceB, "-o", "link", "show", VethPair.DEVICE_B);
        final StringBuilder mac = new StringBuilder();
        for (final byte octet : b.macAddress())
        {
            mac.append(mac.isEmpty() ? "" : ":").append(String.format("%02x", octet & 0xFF));
        }

        assertThat(link).contains("link/ether " + mac + " ");
        assertThat(b.mtu()).isEqualTo(JUMBO_MTU);
        assertThat(b.ifIndex()).isPositive();
    }

    @Test
    void shouldOpenSocketsInTheNamespaceTheThreadEntered() throws IOException
    {
        final java.nio.file.Path netns = java.nio.file.Path.of("/proc/thread-self/ns/net");
        final String outside = java.nio.file.Files.readSymbolicLink(netns).toString();
        final String inside = NetworkNamespace.callIn(veth.namespaceA, () ->
        {
            try
            {
                return java.nio.file.Files.readSymbolicLink(netns).toString();
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException(ex);
            }
        });

        assertThat(inside).startsWith("net:[").isNotEqualTo(outside);
        assertThat(java.nio.file.Files.readSymbolicLink(netns).toString()).as("caller unaffected").isEqualTo(outside);
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(RxRingVersion.class)
    void shouldNotReceiveItsOwnTransmissionsWithEitherRing(final RxRingVersion version) throws InterruptedException
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A)
            .withRxRingVersion(version));
        final AfPacketPort b = open(veth.namespaceB, receiver(version));
        final Random random = new Random(7);
        for (int i = 0; i < 50; i++)
        {
            final byte[] frame = testFrame(i, 200, random);
            assertThat(a.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
        }
        assertThat(a.flush()).isEqualTo(50);

        final List<byte[]> atB = new ArrayList<>();
        awaitCondition(() ->
        {
            b.receive(collectTestFrames(atB), 64);
            return atB.size() >= 50;
        });
        // Give A's ring more than a block timeout to surface anything it might have captured.
        final List<byte[]> atA = new ArrayList<>();
        final long deadline = System.nanoTime() + 50_000_000L;
        while (System.nanoTime() < deadline)
        {
            a.receive(collectTestFrames(atA), 64);
            Thread.sleep(1);
        }

        assertThat(atB).hasSize(50);
        assertThat(atA).isEmpty();
        assertThat(a.counters().rxFrames()).isZero();
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(RxRingVersion.class)
    void shouldHonourTheReceiveBatchLimitAcrossBlocks(final RxRingVersion version)
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A));
        // V2: two 2 KiB slots per 4 KiB block, so the 100 frames cross many blocks too.
        final AfPacketPort b = open(veth.namespaceB, receiver(version)
            .withRxRing(4096, 64, 1).withRxFrameSize(2048));
        final Random random = new Random(3);
        final List<byte[]> sent = new ArrayList<>();
        for (int i = 0; i < 100; i++)
        {
            final byte[] frame = testFrame(i, 700, random);
            sent.add(frame);
            a.send(new UnsafeBuffer(frame), 0, frame.length);
        }
        a.flush();

        final List<byte[]> received = new ArrayList<>();
        final FrameHandler collect = collectTestFrames(received);
        awaitCondition(() ->
        {
            final int delivered = b.receive(collect, 3);
            assertThat(delivered).isLessThanOrEqualTo(3);
            return received.size() >= sent.size();
        });

        assertThat(received).containsExactlyElementsOf(sent);
    }

    @Test
    void shouldTellAV2RingsBacklogExactlyAcrossTheRingsEnd()
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A));
        // two 2 KiB slots per 4 KiB block, 64 blocks: 128 slots
        final AfPacketPort b = open(veth.namespaceB, receiver(RxRingVersion.V2)
            .withRxRing(4096, 64, 1).withRxFrameSize(2048));
        assertThat(b.receiveCapacity()).isEqualTo(128);
        final UnsafeBuffer frame = new UnsafeBuffer(testFrame(1, 700, new Random(5)));
        final FrameHandler ignore = (buffer, offset, length, flags) -> { };
        sendFrames(a, frame, 40);
        awaitCondition(() -> b.receiveBacklogAtLeast(40));
        assertThat(b.receiveBacklogAtLeast(41)).isFalse();
        assertThat(b.receive(ignore, 10)).isEqualTo(10);
        assertThat(b.receiveBacklogAtLeast(30)).isTrue();
        assertThat(b.receiveBacklogAtLeast(31)).isFalse();
        assertThat(b.receive(ignore, 64)).isEqualTo(30);
        assertThat(b.receiveBacklogAtLeast(1)).isFalse();

        // 100 more: slots 40..127 and on from 0 again
        sendFrames(a, frame, 100);
        awaitCondition(() -> b.receiveBacklogAtLeast(100));
        assertThat(b.receiveBacklogAtLeast(101)).isFalse();
        assertThat(b.receiveBacklogAtLeast(129)).as("more than the ring holds").isFalse();
        int read = 0;
        while (read < 100)
        {
            read += b.receive(ignore, 64);
        }
        assertThat(b.receiveBacklogAtLeast(1)).isFalse();
    }

    @Test
    void shouldTellAV3RingsBacklogInWholeBlocks()
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A));
        final AfPacketPort b = open(veth.namespaceB, receiver(RxRingVersion.V3).withRxRing(32768, 16, 1));
        // a frame of the pair's 9000-byte MTU takes 9104 bytes of a block: three to a 32 KiB block, 48 in the ring
        assertThat(b.mtu()).isEqualTo(JUMBO_MTU);
        assertThat(b.receiveCapacity()).isEqualTo(48);
        final UnsafeBuffer frame = new UnsafeBuffer(testFrame(1, 700, new Random(6)));
        sendFrames(a, frame, 100);
        // 100 frames of 700 bytes fill two blocks and part of a third (handed over by its 1 ms timer): at least
        // three blocks, counted as 9 frames of the MTU, and far from the ring's 16
        awaitCondition(() -> b.receiveBacklogAtLeast(9));
        assertThat(b.receiveBacklogAtLeast(13)).isFalse();
        final int[] read = {0};
        awaitCondition(() ->
        {
            read[0] += b.receive((buffer, offset, length, flags) -> { }, 64);
            return read[0] >= 100;
        });
        assertThat(b.receiveBacklogAtLeast(1)).isFalse();
    }

    private static void sendFrames(final AfPacketPort port, final UnsafeBuffer frame, final int count)
    {
        for (int i = 0; i < count; i++)
        {
            assertThat(port.send(frame, 0, 700)).isTrue();
        }
        assertThat(port.flush()).isEqualTo(count);
    }

    @Test
    void shouldLimitTxFramesToTheSlotLessItsHeader()
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A));
        final UnsafeBuffer frame = new UnsafeBuffer(new byte[4096]);

        assertThat(a.maxTxFrameLength()).isEqualTo(AfPacketConfiguration.DEFAULT_TX_FRAME_SIZE - 32);
        assertThat(a.send(frame, 0, a.maxTxFrameLength() + 1)).isFalse();
        assertThat(a.send(frame, 0, 13)).isFalse();
        assertThat(a.counters().txErrors()).isEqualTo(2);
        assertThat(a.flush()).isZero();
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(RxRingVersion.class)
    void shouldCountKernelDropsWhenEitherRingOverflows(final RxRingVersion version)
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A));
        final AfPacketPort b = open(veth.namespaceB, receiver(version)
            .withRxRing(4096, 2, 1).withRxFrameSize(2048));
        final UnsafeBuffer frame = new UnsafeBuffer(testFrame(1, 1000, new Random(1)));
        for (int i = 0; i < 100; i++)
        {
            a.send(frame, 0, 1000);
        }
        assertThat(a.flush()).isEqualTo(100);

        // Nothing was received while the frames arrived: two 4 KiB blocks hold at most 6 frames of 1000 bytes
        // (V3) or 4 (V2, 2 KiB slots), the kernel dropped the rest. Drain and read the statistics until every frame is accounted for.
        final int[] delivered = {0};
        awaitCondition(() ->
        {
            delivered[0] += b.receive((buffer, offset, length, flags) -> { }, 64);
            b.refreshKernelStatistics();
            return delivered[0] + b.counters().rxDropped() >= 100;
        });

        assertThat(delivered[0] + b.counters().rxDropped()).isEqualTo(100);
        assertThat(b.counters().rxDropped()).isGreaterThanOrEqualTo(90);
    }

    @Test
    void shouldSendWithQdiscBypassWhenConfigured()
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A)
            .withQdiscBypass(true));
        final AfPacketPort b = open(veth.namespaceB, AfPacketConfiguration.defaults(VethPair.DEVICE_B));
        final Random random = new Random(5);
        final List<byte[]> sent = new ArrayList<>();
        for (int i = 0; i < 10; i++)
        {
            final byte[] frame = testFrame(i, 300, random);
            sent.add(frame);
            assertThat(a.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
        }
        a.flush();

        final List<byte[]> received = new ArrayList<>();
        awaitCondition(() ->
        {
            b.receive(collectTestFrames(received), 64);
            return received.size() >= sent.size();
        });

        assertThat(received).containsExactlyElementsOf(sent);
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(RxRingVersion.class)
    void shouldFlagAFrameWhoseVlanTagTheKernelTookOff(final RxRingVersion version)
    {
        // The kernel moves a received frame's (outer) 802.1Q or 802.1ad tag out of its bytes before a packet socket
        // sees it: without the flag a tagged frame looks untagged (issue 30: the appliance took tagged frames with a
        // member's addresses for the member's). An inner tag stays in the bytes.
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A)
            .withTxRing(2048, 16));
        final AfPacketPort b = open(veth.namespaceB, receiver(version));
        final Random random = new Random(30);
        final byte[] plain = testFrame(1, 100, random);
        final byte[] tagged = withTag(testFrame(2, 100, random), 0x8100, 5);
        final byte[] qinq = withTag(withTag(testFrame(3, 100, random), 0x8100, 5), 0x88A8, 7);
        for (final byte[] frame : List.of(plain, tagged, qinq))
        {
            assertThat(a.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
        }
        a.flush();
        final List<byte[]> received = new ArrayList<>();
        final List<Integer> flags = new ArrayList<>();
        awaitCondition(() ->
        {
            b.receive((buffer, offset, length, frameFlags) ->
            {
                final byte[] bytes = new byte[length];
                buffer.getBytes(offset, bytes);
                final int type = buffer.getShort(offset + 12, java.nio.ByteOrder.BIG_ENDIAN) & 0xFFFF;
                if (type == TEST_ETHER_TYPE || type == 0x8100)
                {
                    received.add(bytes);
                    flags.add(frameFlags);
                }
            }, 64);
            return received.size() >= 3;
        });
        assertThat(received.get(0)).isEqualTo(plain);
        assertThat(flags.get(0) & FrameHandler.FLAG_VLAN_TAG_STRIPPED).isZero();
        assertThat(received.get(1)).as("the tag taken off").isEqualTo(withoutTag(tagged));
        assertThat(flags.get(1) & FrameHandler.FLAG_VLAN_TAG_STRIPPED).isEqualTo(FrameHandler.FLAG_VLAN_TAG_STRIPPED);
        assertThat(received.get(2)).as("the outer tag taken off").isEqualTo(withoutTag(qinq));
        assertThat(flags.get(2) & FrameHandler.FLAG_VLAN_TAG_STRIPPED).isEqualTo(FrameHandler.FLAG_VLAN_TAG_STRIPPED);
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(RxRingVersion.class)
    void shouldReceiveOnlyRoceV2FramesWhenRoceOnly(final RxRingVersion version)
    {
        // A worker's port stands for an RDMA NIC: the host's other traffic on the interface stays out of its ring.
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A)
            .withTxRing(2048, 16));
        final AfPacketPort b = open(veth.namespaceB, receiver(version).withRoceOnly(true));
        final java.net.InetAddress v4a = java.net.InetAddress.ofLiteral("10.0.0.1");
        final java.net.InetAddress v4b = java.net.InetAddress.ofLiteral("10.0.0.2");
        final java.net.InetAddress v6a = java.net.InetAddress.ofLiteral("fd00::1");
        final java.net.InetAddress v6b = java.net.InetAddress.ofLiteral("fd00::2");
        final byte[] otherUdp = IpFrames.frame(v4a, v4b, 2, false);
        ByteBuffer.wrap(otherUdp).putShort(14 + 20 + 2, (short)5201);
        final byte[] tcp = IpFrames.frame(v4a, v4b, 3, false);
        tcp[14 + 9] = 6;
        final List<byte[]> frames = List.of(testFrame(4, 100, new Random(31)), otherUdp, tcp,
            IpFrames.frame(v4a, v4b, 11, false), IpFrames.frame(v6a, v6b, 12, false),
            IpFrames.frame(v4a, v4b, 13, true));
        for (final byte[] frame : frames)
        {
            assertThat(a.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
        }
        a.flush();
        final List<Integer> received = new ArrayList<>();
        final List<Integer> others = new ArrayList<>();
        awaitCondition(() ->
        {
            b.receive((buffer, offset, length, frameFlags) ->
            {
                final byte[] bytes = new byte[length];
                buffer.getBytes(offset, bytes);
                final int sequence = IpFrames.sequence(bytes);
                (sequence >= 11 && sequence <= 13 ? received : others).add(sequence);
            }, 64);
            return received.size() >= 3;
        });
        // The filtered frames were sent before the RoCE ones, on one link in order: had they passed, they were in.
        b.receive((buffer, offset, length, frameFlags) -> others.add(-2), 64);
        assertThat(received).containsExactly(11, 12, 13);
        assertThat(others).isEmpty();
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(RxRingVersion.class)
    void shouldReceiveOnlyFramesToItsQueuePairsOnceAskedAndFollowEachNewSet(final RxRingVersion version)
    {
        // Two endpoints on one interface (two trainers' sidecars on a host): each sees only its own QPs' frames.
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A)
            .withTxRing(2048, 16));
        final AfPacketPort mine = open(veth.namespaceB, receiver(version).withRoceOnly(true));
        final AfPacketPort theirs = open(veth.namespaceB, receiver(version).withRoceOnly(true));
        assertThat(mine.receiveOnlyQueuePairs(new int[] {0x111, 0x112}, 2)).isTrue();
        assertThat(theirs.receiveOnlyQueuePairs(new int[] {0x211}, 1)).isTrue();
        final java.net.InetAddress v4a = java.net.InetAddress.ofLiteral("10.0.0.1");
        final java.net.InetAddress v4b = java.net.InetAddress.ofLiteral("10.0.0.2");
        final java.net.InetAddress v6a = java.net.InetAddress.ofLiteral("fd00::1");
        final java.net.InetAddress v6b = java.net.InetAddress.ofLiteral("fd00::2");
        final List<byte[]> frames = List.of(IpFrames.frameToQp(v4a, v4b, 1, false, 0, 0x211),
            IpFrames.frameToQp(v4a, v4b, 2, false, 0, 0x999), IpFrames.frameToQp(v6a, v6b, 3, false, 0, 0x211),
            IpFrames.frameToQp(v4a, v4b, 11, false, 0, 0x111), IpFrames.frameToQp(v6a, v6b, 12, false, 0, 0x112),
            IpFrames.frameToQp(v4a, v4b, 13, true, 0, 0x112));
        sendAll(a, frames);
        assertThat(receiveSequences(mine, 3)).containsExactly(11, 12, 13);
        assertThat(receiveSequences(theirs, 2)).containsExactly(1, 3);

        // A new queue pair: the next call's set replaces the last at once.
        assertThat(mine.receiveOnlyQueuePairs(new int[] {0x111, 0x112, 0x999}, 3)).isTrue();
        sendAll(a, List.of(IpFrames.frameToQp(v4a, v4b, 21, false, 0, 0x211),
            IpFrames.frameToQp(v4a, v4b, 22, false, 0, 0x999)));
        assertThat(receiveSequences(mine, 1)).containsExactly(22);
        assertThat(receiveSequences(theirs, 1)).containsExactly(21);
        // Had a refused frame passed, it would have arrived before the last accepted one, on one link in order.
        assertThat(receiveSequences(mine, 0)).isEmpty();
        assertThat(receiveSequences(theirs, 0)).isEmpty();
    }

    @Test
    void shouldNotFilterByQueuePairsOnAPortThatTakesEveryFrame()
    {
        final AfPacketPort appliance = open(veth.namespaceB, receiver(RxRingVersion.V2));
        assertThat(appliance.receiveOnlyQueuePairs(new int[] {0x111}, 1)).isFalse();
    }

    private static void sendAll(final AfPacketPort port, final List<byte[]> frames)
    {
        for (final byte[] frame : frames)
        {
            assertThat(port.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
        }
        port.flush();
    }

    /** The sequence numbers of the next {@code expected} frames, and of any more that came with them. */
    private static List<Integer> receiveSequences(final AfPacketPort port, final int expected)
    {
        final List<Integer> sequences = new ArrayList<>();
        final FrameHandler handler = (buffer, offset, length, frameFlags) ->
        {
            final byte[] bytes = new byte[length];
            buffer.getBytes(offset, bytes);
            sequences.add(IpFrames.sequence(bytes));
        };
        if (expected > 0)
        {
            awaitCondition(() ->
            {
                port.receive(handler, 64);
                return sequences.size() >= expected;
            });
        }
        port.receive(handler, 64);
        return sequences;
    }

    private static byte[] withTag(final byte[] frame, final int tpid, final int vlan)
    {
        final byte[] tagged = new byte[frame.length + 4];
        System.arraycopy(frame, 0, tagged, 0, 12);
        tagged[12] = (byte)(tpid >>> 8);
        tagged[13] = (byte)tpid;
        tagged[14] = (byte)(vlan >>> 8);
        tagged[15] = (byte)vlan;
        System.arraycopy(frame, 12, tagged, 16, frame.length - 12);
        return tagged;
    }

    private static byte[] withoutTag(final byte[] frame)
    {
        final byte[] untagged = new byte[frame.length - 4];
        System.arraycopy(frame, 0, untagged, 0, 12);
        System.arraycopy(frame, 16, untagged, 12, frame.length - 16);
        return untagged;
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(RxRingVersion.class)
    void shouldFlagChecksumNotReadyForUdpFromAKernelSocketWithChecksumOffload(final RxRingVersion version)
    {
        VethPair.run("ip", "netns", "exec", veth.namespaceA, "ethtool", "-K", VethPair.DEVICE_A, "tx", "on");
        final AfPacketPort b = open(veth.namespaceB, receiver(version));
        final int udpPort = 4791;
        final DatagramChannel channel = NetworkNamespace.callIn(veth.namespaceA, () ->
        {
            try
            {
                return DatagramChannel.open(StandardProtocolFamily.INET).bind(new InetSocketAddress(VethPair.ADDRESS_A, 0));
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException(ex);
            }
        });

        final int[] udpFlags = {-1};
        final FrameHandler findUdp = (buffer, offset, length, flags) ->
        {
            final boolean ipv4 = (buffer.getShort(offset + 12, java.nio.ByteOrder.BIG_ENDIAN) & 0xFFFF) == 0x0800;
            if (ipv4 && buffer.getByte(offset + 14 + 9) == 17 &&
                (buffer.getShort(offset + 14 + 20 + 2, java.nio.ByteOrder.BIG_ENDIAN) & 0xFFFF) == udpPort)
            {
                udpFlags[0] = flags;
            }
        };
        try (channel)
        {
            awaitCondition(() ->
            {
                try
                {
                    // Resent until seen: the first datagram may wait for ARP.
                    channel.send(ByteBuffer.wrap(new byte[64]), new InetSocketAddress(VethPair.ADDRESS_B, udpPort));
                }
                catch (final IOException ex)
                {
                    throw new UncheckedIOException(ex);
                }
                b.receive(findUdp, 64);
                return udpFlags[0] >= 0;
            });
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }

        assertThat(udpFlags[0] & FrameHandler.FLAG_CHECKSUM_NOT_READY).isEqualTo(FrameHandler.FLAG_CHECKSUM_NOT_READY);
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(RxRingVersion.class)
    void shouldNotAllocateWithEitherRing(final RxRingVersion version)
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A));
        final AfPacketPort b = open(veth.namespaceB, receiver(version));
        final UnsafeBuffer frame = new UnsafeBuffer(testFrame(1, 128, new Random(1)));
        final long[] sink = new long[1];
        final FrameHandler handler = (buffer, offset, length, flags) -> sink[0] += length;
        final Runnable cycle = () ->
        {
            for (int i = 0; i < 8; i++)
            {
                a.send(frame, 0, 128);
            }
            a.flush();
            b.receive(handler, 64);
        };
        // receive() reads the kernel statistics only every few thousand calls, too rarely to be compiled soon;
        // interpreted, that downcall allocates a little. Warm it so the windows measure the steady state.
        for (int i = 0; i < 100_000; i++)
        {
            b.refreshKernelStatistics();
        }

        // Up to 60 rounds for the JIT to compile send (tryClaim + commit), flush and receive on a loaded machine.
        assertThat(AllocationProbe.roundsUntilAllocationFree(cycle, 2_000, 60))
            .as("a window of 2000 cycles without allocation once compiled").isPositive();

    }

    @Test
    void shouldCountFramesLongerThanAV2SlotAsTruncated()
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A)
            .withTxRing(AfPacketConfiguration.JUMBO_TX_FRAME_SIZE, 16));
        final AfPacketPort b = open(veth.namespaceB, receiver(RxRingVersion.V2).withRxFrameSize(2048));
        final Random random = new Random(11);
        final byte[] jumbo = testFrame(1, JUMBO_FRAME, random);
        final byte[] small = testFrame(2, 100, random);
        a.send(new UnsafeBuffer(jumbo), 0, jumbo.length);
        a.send(new UnsafeBuffer(small), 0, small.length);
        assertThat(a.flush()).isEqualTo(2);

        final List<byte[]> received = new ArrayList<>();
        awaitCondition(() ->
        {
            b.receive(collectTestFrames(received), 64);
            return !received.isEmpty();
        });

        assertThat(b.rxFrameSize()).isEqualTo(2048);
        assertThat(received).containsExactly(small);
        assertThat(b.counters().rxTruncated()).isEqualTo(1);
    }

    @Test
    void shouldSizeV2SlotsFromTheMtuByDefault()
    {
        final AfPacketPort b = open(veth.namespaceB, receiver(RxRingVersion.V2));
        final AfPacketPort v3 = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A)
            .withRxRingVersion(RxRingVersion.V3));

        assertThat(b.rxFrameSize()).isEqualTo(AfPacketConfiguration.defaults("x").rxFrameSizeFor(JUMBO_MTU));
        assertThat(v3.rxFrameSize()).isZero();
    }

    /**
     * No option of the worker's commands or the daemon's configuration sets the receive block size, so a port
     * whose MTU-sized slot does not fit its blocks (lo's 65536 without offload) grows them instead of refusing.
     */
    @Test
    void shouldGrowTheBlocksOfAV2RingThatCannotHoldAnMtuSizedSlot()
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A)
            .withTxRing(AfPacketConfiguration.JUMBO_TX_FRAME_SIZE, 16));
        final AfPacketPort b = open(veth.namespaceB, receiver(RxRingVersion.V2).withRxRing(8192, 4, 1));
        final byte[] jumbo = testFrame(1, JUMBO_FRAME, new Random(17));
        a.send(new UnsafeBuffer(jumbo), 0, jumbo.length);
        assertThat(a.flush()).isEqualTo(1);

        final List<byte[]> received = new ArrayList<>();
        awaitCondition(() ->
        {
            b.receive(collectTestFrames(received), 64);
            return !received.isEmpty();
        });

        assertThat(b.configuration().rxBlockSize()).isEqualTo(AfPacketConfiguration.SEGMENTATION_RX_BLOCK_SIZE);
        assertThat(b.configuration().rxBlockCount()).isEqualTo(AfPacketConfiguration.SEGMENTATION_RX_BLOCK_COUNT);
        assertThat(b.rxFrameSize()).isEqualTo(AfPacketConfiguration.defaults("x").rxFrameSizeFor(JUMBO_MTU));
        assertThat(received).containsExactly(jumbo);
        assertThat(b.counters().rxTruncated()).isZero();
    }

    /**
     * The point of V2: a lone frame is in user space as soon as the kernel has written it. A V3 block timeout of
     * a second is configured too, to show V2 does not wait for it.
     */
    @Test
    void shouldHandALoneFrameToAV2ReaderAtOnceWithoutWaitingForABlockTimer()
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A));
        final AfPacketPort b = open(veth.namespaceB, receiver(RxRingVersion.V2)
            .withRxRing(AfPacketConfiguration.DEFAULT_RX_BLOCK_SIZE, 4, SLOW_BLOCK_TIMEOUT_MS));
        final Random random = new Random(13);

        for (int i = 0; i < 5; i++)
        {
            final long nanos = sendOneAndTimeDelivery(a, b, testFrame(i, 90, random), 2 * SLOW_BLOCK_TIMEOUT_MS);
            assertThat(nanos).as("frame %d delivered after %d us", i, nanos / 1000).isLessThan(PROMPT_DELIVERY_NS);
        }
    }

    /**
     * The contrast that makes the V2 check meaningful: in a V3 ring a lone frame waits for its block's timer.
     * The first frame lines up with the timer (its block retires on expiry and the next block opens with a fresh
     * period); the second is then held for most of a period.
     */
    @Test
    void shouldHoldALoneFrameInAV3BlockUntilItsTimerFires()
    {
        final AfPacketPort a = open(veth.namespaceA, AfPacketConfiguration.defaults(VethPair.DEVICE_A));
        final AfPacketPort b = open(veth.namespaceB, receiver(RxRingVersion.V3)
            .withRxRing(AfPacketConfiguration.DEFAULT_RX_BLOCK_SIZE, 4, SLOW_BLOCK_TIMEOUT_MS));
        final Random random = new Random(17);
        sendOneAndTimeDelivery(a, b, testFrame(0, 90, random), 3 * SLOW_BLOCK_TIMEOUT_MS);

        final long nanos = sendOneAndTimeDelivery(a, b, testFrame(1, 90, random), 3 * SLOW_BLOCK_TIMEOUT_MS);

        assertThat(nanos).as("held for the block timer").isGreaterThan(PROMPT_DELIVERY_NS);
    }

    /**
     * Send {@code frame} from {@code a}, then busy-poll {@code b} until it arrives.
     *
     * @return nanoseconds from just after the send returned to the frame's delivery.
     */
    private static long sendOneAndTimeDelivery(
        final AfPacketPort a, final AfPacketPort b, final byte[] frame, final int timeoutMs)
    {
        final List<byte[]> received = new ArrayList<>();
        final FrameHandler collect = collectTestFrames(received);
        assertThat(a.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
        assertThat(a.flush()).isEqualTo(1);
        final long sent = System.nanoTime();
        final long deadline = sent + timeoutMs * 1_000_000L;
        while (received.isEmpty())
        {
            b.receive(collect, 16);
            assertThat(System.nanoTime()).as("frame not delivered within %d ms", timeoutMs).isLessThan(deadline);
        }
        final long nanos = System.nanoTime() - sent;
        assertThat(received).containsExactly(frame);
        return nanos;
    }

    private static AfPacketConfiguration receiver(final RxRingVersion version)
    {
        return AfPacketConfiguration.defaults(VethPair.DEVICE_B).withRxRingVersion(version);
    }

    private AfPacketPort open(final String namespace, final AfPacketConfiguration configuration)
    {
        return track(NetworkNamespace.callIn(namespace, () -> AfPacketPort.open(configuration)));
    }
}
