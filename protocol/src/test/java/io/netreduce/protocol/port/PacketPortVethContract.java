package io.netreduce.protocol.port;

import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.BooleanSupplier;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The behaviour every kernel-backed {@link PacketPort} kind shows over a real veth pair (MTU 9000) between two
 * network namespaces: each kind's test class extends this and says how to open its ports. Needs root; skipped
 * otherwise. The namespaces (and the veth pair in them) are deleted after the class.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class PacketPortVethContract
{
    /** Local experimental EtherType: marks the tests' frames, so anything else on the link is ignored. */
    static final int TEST_ETHER_TYPE = 0x88B5;
    static final int JUMBO_MTU = 9000;
    static final int JUMBO_FRAME = JUMBO_MTU + 14;

    VethPair veth;
    final List<PacketPort> ports = new ArrayList<>();

    /** A short tag naming this kind's namespaces, distinct per subclass. */
    abstract String namespaceTag();

    /** Open a port of this kind on {@code device} in {@code namespace}, able to send jumbo frames. */
    abstract PacketPort openPort(String namespace, String device);

    /** As {@link #openPort}, with {@code slots} transmit slots. */
    abstract PacketPort openPortWithTransmitSlots(String namespace, String device, int slots);

    /** As {@link #openPort}, with a receive ring of at most {@link #tinyReceiveRingFrames()} 1000-byte frames. */
    abstract PacketPort openPortWithTinyReceiveRing(String namespace, String device);

    /** How many 1000-byte frames the tiny receive ring holds at most (below 100). */
    abstract int tinyReceiveRingFrames();

    abstract int maxTxFrameLength(PacketPort port);

    abstract void refreshKernelStatistics(PacketPort port);

    @BeforeAll
    void createNamespaces()
    {
        assumeTrue(VethPair.isRoot(), "needs root for network namespaces and raw sockets");
        veth = new VethPair(namespaceTag(), JUMBO_MTU);
    }

    @AfterAll
    void deleteNamespaces()
    {
        if (null != veth)
        {
            veth.close();
        }
    }

    @AfterEach
    void closePorts()
    {
        ports.forEach(PacketPort::close);
        ports.clear();
    }

    <T extends PacketPort> T track(final T port)
    {
        ports.add(port);
        return port;
    }

    @Test
    void shouldCarryAMixedSizeBatchWithJumboFramesByteIdenticalAndInOrderInBothDirections()
    {
        final PacketPort a = openPort(veth.namespaceA, VethPair.DEVICE_A);
        final PacketPort b = openPort(veth.namespaceB, VethPair.DEVICE_B);
        assertThat(maxTxFrameLength(a)).isGreaterThanOrEqualTo(JUMBO_FRAME);

        carryAndCheck(a, b, 42);
        carryAndCheck(b, a, 43);
    }

    private void carryAndCheck(final PacketPort from, final PacketPort to, final long seed)
    {
        final long txFramesBefore = from.counters().txFrames();
        final long rxFramesBefore = to.counters().rxFrames();
        final Random random = new Random(seed);
        final List<byte[]> sent = new ArrayList<>();
        for (int i = 0; i < 1000; i++)
        {
            final int length = i % 50 == 7 ? JUMBO_FRAME : i % 50 == 8 ? 4096 + 100 : 60 + random.nextInt(1514 - 60 + 1);
            sent.add(testFrame(i, length, random));
        }
        sent.set(0, testFrame(0, 60, random));
        sent.set(1, testFrame(1, 1514, random));
        final long sentBytes = sent.stream().mapToLong(f -> f.length).sum();

        final List<byte[]> received = new ArrayList<>();
        final FrameHandler collect = collectTestFrames(received);
        for (final byte[] frame : sent)
        {
            final UnsafeBuffer buffer = new UnsafeBuffer(frame);
            while (!from.send(buffer, 0, frame.length))
            {
                from.flush();
                to.receive(collect, 256);
            }
        }
        awaitCondition(() ->
        {
            from.flush();
            to.receive(collect, 256);
            return received.size() >= sent.size() && from.counters().txFrames() - txFramesBefore >= sent.size();
        });

        assertThat(received).hasSize(sent.size());
        for (int i = 0; i < sent.size(); i++)
        {
            assertThat(received.get(i)).as("frame %d", i).isEqualTo(sent.get(i));
        }
        assertThat(from.counters().txFrames() - txFramesBefore).isEqualTo(1000);
        assertThat(from.counters().txErrors()).isZero();
        assertThat(to.counters().rxFrames() - rxFramesBefore).isEqualTo(1000);
        assertThat(to.counters().rxTruncated()).isZero();
        if (txFramesBefore == 0)
        {
            assertThat(from.counters().txBytes()).isEqualTo(sentBytes);
            assertThat(to.counters().rxBytes()).isEqualTo(sentBytes);
        }
        refreshKernelStatistics(to);
        assertThat(to.counters().rxDropped()).isZero();
    }

    @Test
    void shouldSendAFrameWrittenInPlaceThroughAClaimOnCommit()
    {
        final PacketPort a = openPort(veth.namespaceA, VethPair.DEVICE_A);
        final PacketPort b = openPort(veth.namespaceB, VethPair.DEVICE_B);
        final Random random = new Random(21);
        final byte[] abandoned = testFrame(1, 300, random);
        final byte[] first = testFrame(2, 700, random);
        final byte[] jumbo = testFrame(3, JUMBO_FRAME, random);

        // A claim that is not committed is given up by the next claim: its bytes never leave.
        final int abandonedIndex = a.tryClaim(abandoned.length);
        assertThat(abandonedIndex).isNotNegative();
        a.claimBuffer().putBytes(abandonedIndex, abandoned);
        for (final byte[] frame : List.of(first, jumbo))
        {
            final int index = a.tryClaim(frame.length);
            assertThat(index).isNotNegative();
            final MutableDirectBuffer buffer = a.claimBuffer();
            // Written in two pieces, as the dataplane writes stored headers then a payload.
            buffer.putBytes(index, frame, 0, 14);
            buffer.putBytes(index + 14, frame, 14, frame.length - 14);
            a.commit();
        }
        assertThat(a.flush()).isEqualTo(2);

        final List<byte[]> received = new ArrayList<>();
        awaitCondition(() ->
        {
            b.receive(collectTestFrames(received), 64);
            return received.size() >= 2;
        });
        assertThat(received).containsExactly(first, jumbo);
        assertThat(a.counters().txFrames()).isEqualTo(2);
        assertThat(a.counters().txBytes()).isEqualTo(first.length + jumbo.length);
        assertThatThrownBy(a::commit).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void shouldNotReceiveItsOwnTransmissions() throws InterruptedException
    {
        final PacketPort a = openPort(veth.namespaceA, VethPair.DEVICE_A);
        final PacketPort b = openPort(veth.namespaceB, VethPair.DEVICE_B);
        final Random random = new Random(7);
        for (int i = 0; i < 50; i++)
        {
            final byte[] frame = testFrame(i, 200, random);
            assertThat(a.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
        }
        awaitCondition(() ->
        {
            a.flush();
            return a.counters().txFrames() == 50;
        });

        final List<byte[]> atB = new ArrayList<>();
        awaitCondition(() ->
        {
            b.receive(collectTestFrames(atB), 64);
            return atB.size() >= 50;
        });
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

    @Test
    void shouldHonourTheReceiveBatchLimit()
    {
        final PacketPort a = openPort(veth.namespaceA, VethPair.DEVICE_A);
        final PacketPort b = openPort(veth.namespaceB, VethPair.DEVICE_B);
        final Random random = new Random(3);
        final List<byte[]> sent = new ArrayList<>();
        for (int i = 0; i < 100; i++)
        {
            // Every tenth frame a jumbo one: a limit must not split a multi-buffer frame either.
            final byte[] frame = testFrame(i, i % 10 == 5 ? JUMBO_FRAME : 700, random);
            sent.add(frame);
            assertThat(a.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
        }
        a.flush();

        final List<byte[]> received = new ArrayList<>();
        final FrameHandler collect = collectTestFrames(received);
        awaitCondition(() ->
        {
            a.flush();
            final int delivered = b.receive(collect, 3);
            assertThat(delivered).isLessThanOrEqualTo(3);
            return received.size() >= sent.size();
        });

        assertThat(received).containsExactlyElementsOf(sent);
    }

    @Test
    void shouldCountRingFullWhenEveryTransmitSlotIsQueued()
    {
        final PacketPort a = openPortWithTransmitSlots(veth.namespaceA, VethPair.DEVICE_A, 8);
        final UnsafeBuffer frame = new UnsafeBuffer(testFrame(1, 100, new Random(1)));
        for (int i = 0; i < 8; i++)
        {
            assertThat(a.send(frame, 0, 100)).isTrue();
        }

        assertThat(a.send(frame, 0, 100)).isFalse();
        assertThat(a.tryClaim(100)).isNegative();
        assertThat(a.counters().txRingFull()).isEqualTo(2);
        awaitCondition(() ->
        {
            a.flush();
            return a.counters().txFrames() == 8;
        });
        awaitCondition(() -> a.send(frame, 0, 100));
    }

    @Test
    void shouldRefuseFramesTooLongOrTooShortAsTxErrors()
    {
        final PacketPort a = openPort(veth.namespaceA, VethPair.DEVICE_A);
        final UnsafeBuffer frame = new UnsafeBuffer(new byte[maxTxFrameLength(a) + 1]);

        assertThat(a.send(frame, 0, maxTxFrameLength(a) + 1)).isFalse();
        assertThat(a.send(frame, 0, 13)).isFalse();
        assertThat(a.counters().txErrors()).isEqualTo(2);
        assertThat(a.flush()).isZero();
    }

    @Test
    void shouldCountKernelDropsWhenTheReceiveRingOverflows()
    {
        final PacketPort a = openPort(veth.namespaceA, VethPair.DEVICE_A);
        final PacketPort b = openPortWithTinyReceiveRing(veth.namespaceB, VethPair.DEVICE_B);
        final UnsafeBuffer frame = new UnsafeBuffer(testFrame(1, 1000, new Random(1)));
        for (int i = 0; i < 100; i++)
        {
            a.send(frame, 0, 1000);
        }
        awaitCondition(() ->
        {
            a.flush();
            return a.counters().txFrames() == 100;
        });

        // Nothing was received while the frames arrived: the ring holds a few, the kernel dropped the rest.
        final int[] delivered = {0};
        awaitCondition(() ->
        {
            delivered[0] += b.receive((buffer, offset, length, flags) -> { }, 64);
            refreshKernelStatistics(b);
            return delivered[0] + b.counters().rxDropped() >= 100;
        });

        assertThat(delivered[0] + b.counters().rxDropped()).isEqualTo(100);
        assertThat(b.counters().rxDropped()).isGreaterThanOrEqualTo(100 - tinyReceiveRingFrames());
    }

    @Test
    void shouldWakeAPollingIdleStrategyWhenAFrameArrives()
    {
        final PacketPort a = openPort(veth.namespaceA, VethPair.DEVICE_A);
        final PacketPort b = openPort(veth.namespaceB, VethPair.DEVICE_B);
        try (PortPoller poller = new PortPoller(List.of(b)))
        {
            assertThat(poller.canBlock()).isTrue();
            assertThat(poller.await(20)).as("nothing sent yet").isFalse();
            final PortPollIdleStrategy idle = new PortPollIdleStrategy(poller, 0, 0, 50);
            final byte[] frame = testFrame(7, 200, new Random(7));
            assertThat(a.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
            a.flush();
            assertThat(poller.await(1_000)).isTrue();
            final List<byte[]> atB = new ArrayList<>();
            for (int cycle = 0; cycle < 200 && atB.isEmpty(); cycle++)
            {
                idle.idle(b.receive(collectTestFrames(atB), 64));
            }
            assertThat(atB).hasSize(1);
            assertThat(atB.get(0)).isEqualTo(frame);
        }
    }

    @Test
    void shouldNotAllocateWhenSendingFlushingAndReceiving()
    {
        final PacketPort a = openPort(veth.namespaceA, VethPair.DEVICE_A);
        final PacketPort b = openPort(veth.namespaceB, VethPair.DEVICE_B);
        final UnsafeBuffer frame = new UnsafeBuffer(testFrame(1, 128, new Random(1)));
        final UnsafeBuffer jumbo = new UnsafeBuffer(testFrame(2, JUMBO_FRAME, new Random(2)));
        final long[] sink = new long[1];
        final FrameHandler handler = (buffer, offset, length, flags) -> sink[0] += length;
        final Runnable cycle = () ->
        {
            for (int i = 0; i < 8; i++)
            {
                a.send(frame, 0, 128);
            }
            a.send(jumbo, 0, JUMBO_FRAME);
            a.flush();
            b.receive(handler, 64);
        };
        // receive() reads the kernel statistics only every few thousand calls, too rarely to be compiled soon;
        // interpreted, that downcall allocates a little. Warm it so the windows measure the steady state.
        for (int i = 0; i < 100_000; i++)
        {
            refreshKernelStatistics(b);
        }

        assertThat(AllocationProbe.roundsUntilAllocationFree(cycle, 2_000, 60))
            .as("a window of 2000 cycles without allocation once compiled").isPositive();
    }

    @Test
    void shouldCloseIdempotentlyAndDoNothingOnceClosed()
    {
        final PacketPort a = openPort(veth.namespaceA, VethPair.DEVICE_A);
        a.close();
        a.close();

        final UnsafeBuffer frame = new UnsafeBuffer(testFrame(1, 100, new Random(1)));
        assertThat(a.send(frame, 0, 100)).isFalse();
        assertThat(a.receive((buffer, offset, length, flags) -> { }, 64)).isZero();
        assertThat(a.flush()).isZero();
        // The interface is free for the next port of either kind.
        final PacketPort again = openPort(veth.namespaceA, VethPair.DEVICE_A);
        assertThat(again.name()).isEqualTo(VethPair.DEVICE_A);
    }

    @Test
    void shouldFailWithAClearMessageForAMissingInterface()
    {
        assertThatThrownBy(() -> openPort(veth.namespaceA, "nrt-nosuch0"))
            .isInstanceOf(PortException.class)
            .hasMessageContaining("no such network interface 'nrt-nosuch0'")
            .hasMessageContaining("No such device");
    }

    static FrameHandler collectTestFrames(final List<byte[]> into)
    {
        return (buffer, offset, length, flags) ->
        {
            if (length >= 14 && (buffer.getShort(offset + 12, ByteOrder.BIG_ENDIAN) & 0xFFFF) == TEST_ETHER_TYPE)
            {
                assertThat(flags).as("raw frames carry no pending checksum").isZero();
                final byte[] frame = new byte[length];
                buffer.getBytes(offset, frame);
                into.add(frame);
            }
        };
    }

    /**
     * An Ethernet frame to a locally administered MAC with the test EtherType, a 4-byte sequence number and
     * random payload.
     */
    static byte[] testFrame(final int sequence, final int length, final Random random)
    {
        final byte[] frame = new byte[length];
        random.nextBytes(frame);
        final UnsafeBuffer buffer = new UnsafeBuffer(frame);
        buffer.putBytes(0, new byte[] {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01});
        buffer.putShort(12, (short)TEST_ETHER_TYPE, ByteOrder.BIG_ENDIAN);
        buffer.putInt(14, sequence, ByteOrder.BIG_ENDIAN);
        return frame;
    }

    static void awaitCondition(final BooleanSupplier condition)
    {
        final long deadline = System.nanoTime() + 5_000_000_000L;
        while (!condition.getAsBoolean())
        {
            assertThat(System.nanoTime()).as("timed out").isLessThan(deadline);
            Thread.onSpinWait();
        }
    }
}
