package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class MemoryPortTest
{
    private final List<byte[]> received = new ArrayList<>();
    private final List<Integer> receivedFlags = new ArrayList<>();
    private final FrameHandler collector = (buffer, offset, length, flags) ->
    {
        final byte[] frame = new byte[length];
        buffer.getBytes(offset, frame);
        received.add(frame);
        receivedFlags.add(flags);
    };

    @Test
    void shouldDeliverInjectedFramesInOrderWithTheirFlags()
    {
        try (MemoryPort port = new MemoryPort("m0"))
        {
            final byte[] first = frame(60, 1);
            final byte[] second = frame(1514, 2);
            assertThat(port.inject(first)).isTrue();
            assertThat(port.inject(second, FrameHandler.FLAG_CHECKSUM_NOT_READY)).isTrue();

            assertThat(port.receive(collector, 10)).isEqualTo(2);

            assertThat(received).containsExactly(first, second);
            assertThat(receivedFlags).containsExactly(0, FrameHandler.FLAG_CHECKSUM_NOT_READY);
            assertThat(port.counters().rxFrames()).isEqualTo(2);
            assertThat(port.counters().rxBytes()).isEqualTo(60 + 1514);
        }
    }

    @Test
    void shouldCopyInjectedFramesSoLaterChangesDoNotLeakIn()
    {
        try (MemoryPort port = new MemoryPort("m0"))
        {
            final byte[] original = frame(64, 7);
            final byte[] expected = original.clone();
            port.inject(original);
            original[20] ^= 0x55;

            port.receive(collector, 1);

            assertThat(received).containsExactly(expected);
        }
    }

    @Test
    void shouldHonourTheReceiveBatchLimit()
    {
        try (MemoryPort port = new MemoryPort("m0"))
        {
            for (int i = 0; i < 5; i++)
            {
                port.inject(frame(64, i));
            }

            assertThat(port.receive(collector, 2)).isEqualTo(2);
            assertThat(port.receive(collector, 2)).isEqualTo(2);
            assertThat(port.receive(collector, 2)).isEqualTo(1);
            assertThat(port.receive(collector, 2)).isZero();

            assertThat(received).extracting(f -> (int)f[14]).containsExactly(0, 1, 2, 3, 4);
        }
    }

    @Test
    void shouldHoldSentFramesUntilFlushAndThenExposeThemInOrder()
    {
        try (MemoryPort port = new MemoryPort("m0"))
        {
            final byte[] a = frame(60, 1);
            final byte[] b = frame(9000, 2);
            assertThat(port.send(new UnsafeBuffer(a), 0, a.length)).isTrue();
            assertThat(port.send(new UnsafeBuffer(b), 0, b.length)).isTrue();
            assertThat(port.drainSent()).isEmpty();
            assertThat(port.queuedForSend()).isEqualTo(2);

            assertThat(port.flush()).isEqualTo(2);

            assertThat(port.drainSent()).containsExactly(a, b);
            assertThat(port.drainSent()).isEmpty();
            assertThat(port.counters().txFrames()).isEqualTo(2);
            assertThat(port.counters().txBytes()).isEqualTo(9060);
        }
    }

    @Test
    void shouldSendFromAnOffsetWithinALargerBuffer()
    {
        try (MemoryPort port = new MemoryPort("m0"))
        {
            final byte[] backing = frame(200, 9);
            port.send(new UnsafeBuffer(backing), 50, 100);
            port.flush();

            final byte[] expected = new byte[100];
            System.arraycopy(backing, 50, expected, 0, 100);
            assertThat(port.drainSent()).containsExactly(expected);
        }
    }

    @Test
    void shouldRefuseSendsBeyondItsSlotsAndCountRingFull()
    {
        try (MemoryPort port = new MemoryPort("m0", 2048, 3, 1 << 16))
        {
            final UnsafeBuffer frame = new UnsafeBuffer(frame(100, 0));
            for (int i = 0; i < 3; i++)
            {
                assertThat(port.send(frame, 0, 100)).isTrue();
            }

            assertThat(port.send(frame, 0, 100)).isFalse();
            assertThat(port.counters().txRingFull()).isEqualTo(1);

            port.flush();
            assertThat(port.send(frame, 0, 100)).isTrue();
        }
    }

    @Test
    void shouldCountOversizeAndEmptyFramesAsTxErrors()
    {
        try (MemoryPort port = new MemoryPort("m0", 2048, 8, 1 << 16))
        {
            final UnsafeBuffer big = new UnsafeBuffer(new byte[4096]);

            assertThat(port.send(big, 0, 2049)).isFalse();
            assertThat(port.send(big, 0, 0)).isFalse();
            assertThat(port.inject(new byte[2049])).isFalse();

            assertThat(port.counters().txErrors()).isEqualTo(2);
            assertThat(port.flush()).isZero();
        }
    }

    @Test
    void shouldDeliverWhatOnePortFlushesToItsWiredPeer()
    {
        try (MemoryPort left = new MemoryPort("left"); MemoryPort right = new MemoryPort("right"))
        {
            MemoryPort.wire(left, right);
            final byte[] toRight = frame(80, 1);
            final byte[] toLeft = frame(90, 2);

            left.send(new UnsafeBuffer(toRight), 0, toRight.length);
            assertThat(right.receive(collector, 10)).as("nothing before flush").isZero();
            left.flush();
            right.send(new UnsafeBuffer(toLeft), 0, toLeft.length);
            right.flush();

            assertThat(right.receive(collector, 10)).isEqualTo(1);
            assertThat(left.receive(collector, 10)).isEqualTo(1);
            assertThat(received).containsExactly(toRight, toLeft);
            assertThat(left.drainSent()).as("wired ports keep no outbound copies").isEmpty();
            assertThat(left.counters().txFrames()).isEqualTo(1);
            assertThat(right.counters().rxFrames()).isEqualTo(1);
        }
    }

    @Test
    void shouldCountFramesLostToAFullPeerQueueAsPeerRxDropped()
    {
        try (MemoryPort left = new MemoryPort("left", 1024, 64, 1 << 14);
            MemoryPort right = new MemoryPort("right", 1024, 64, 1 << 14))
        {
            MemoryPort.wire(left, right);
            final UnsafeBuffer frame = new UnsafeBuffer(frame(1000, 0));
            for (int i = 0; i < 20; i++)
            {
                left.send(frame, 0, 1000);
            }

            assertThat(left.flush()).isEqualTo(20);

            int delivered = 0;
            int got;
            while ((got = right.receive(collector, 100)) > 0)
            {
                delivered += got;
            }
            assertThat(delivered).isBetween(1, 19);
            assertThat(right.counters().rxDropped()).isEqualTo(20 - delivered);
            assertThat(left.counters().txFrames()).isEqualTo(20);
        }
    }

    @Test
    void shouldNotAllocateWhenReceivingSendingAndFlushing()
    {
        try (MemoryPort left = new MemoryPort("left"); MemoryPort right = new MemoryPort("right"))
        {
            MemoryPort.wire(left, right);
            final UnsafeBuffer frame = new UnsafeBuffer(frame(256, 3));
            final long[] sink = new long[1];
            final FrameHandler handler = (buffer, offset, length, flags) -> sink[0] += buffer.getByte(offset + 14);

            final Runnable cycle = () ->
            {
                for (int i = 0; i < 16; i++)
                {
                    left.send(frame, 0, 256);
                }
                left.flush();
                right.receive(handler, 64);
            };
            final int rounds = AllocationProbe.roundsUntilAllocationFree(cycle, 5_000, 30);

            assertThat(rounds).as("a window of 5000 cycles without allocation once compiled").isPositive();
            assertThat(right.counters().rxFrames()).isEqualTo(rounds * 5_000L * 16);
        }
    }

    /**
     * A frame of {@code length} bytes whose byte 14 is {@code marker} and the rest a pattern.
     */
    static byte[] frame(final int length, final int marker)
    {
        final byte[] frame = new byte[length];
        for (int i = 0; i < length; i++)
        {
            frame[i] = (byte)(i * 31 + marker);
        }
        frame[14] = (byte)marker;
        return frame;
    }

    @Test
    void shouldSendAFrameWrittenInPlaceIntoAClaimedSlot()
    {
        final MemoryPort a = new MemoryPort("a", 256, 2, 1 << 16);
        final MemoryPort b = new MemoryPort("b", 256, 2, 1 << 16);
        MemoryPort.wire(a, b);
        final int index = a.tryClaim(60);
        assertThat(index).isGreaterThanOrEqualTo(0);
        for (int i = 0; i < 60; i++)
        {
            a.claimBuffer().putByte(index + i, (byte)i);
        }
        a.commit();
        assertThat(a.flush()).isEqualTo(1);
        final java.util.List<byte[]> received = new java.util.ArrayList<>();
        b.receive((buffer, offset, length, flags) ->
        {
            final byte[] copy = new byte[length];
            buffer.getBytes(offset, copy);
            received.add(copy);
        }, 10);
        assertThat(received).hasSize(1);
        for (int i = 0; i < 60; i++)
        {
            assertThat(received.get(0)[i]).isEqualTo((byte)i);
        }
    }

    @Test
    void shouldRefuseAClaimWhenEveryTransmitSlotIsTakenAndCountIt()
    {
        final MemoryPort a = new MemoryPort("a", 256, 1, 1 << 16);
        assertThat(a.tryClaim(60)).isGreaterThanOrEqualTo(0);
        a.commit();
        assertThat(a.tryClaim(60)).isEqualTo(-1);
        assertThat(a.tryClaim(1000)).as("longer than a slot").isEqualTo(-1);
        assertThat(a.counters().get(PortCounters.TX_RING_FULL)).isEqualTo(1);
        assertThat(a.counters().get(PortCounters.TX_ERRORS)).isEqualTo(1);
    }
}
