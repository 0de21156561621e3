package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static io.netreduce.protocol.port.LinuxPacketAbi.*;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The V2 slot walker over synthetic slots laid out as the kernel lays them out: fixed-size slots that never
 * straddle a block (the block tail is unused), each a tpacket2_hdr, the sockaddr_ll at 32 and the frame at tp_mac.
 */
class TpacketV2RxRingTest
{
    private static final int BLOCK_SIZE = 4096;
    private static final int BLOCK_COUNT = 3;
    /** Three slots per block with 1072 bytes of unused tail: exercises the jump to the next block. */
    private static final int FRAME_SIZE = 1008;
    private static final int SLOTS_PER_BLOCK = BLOCK_SIZE / FRAME_SIZE;
    private static final int SLOT_COUNT = SLOTS_PER_BLOCK * BLOCK_COUNT;
    /** Where the kernel puts an Ethernet frame in a V2 slot; any value must work, the reader follows tp_mac. */
    private static final int MAC_OFFSET = TPACKET2_RX_ETHERNET_MAC_OFFSET;

    private final UnsafeBuffer ring = new UnsafeBuffer(new byte[BLOCK_SIZE * BLOCK_COUNT]);
    private final PortCounters counters = new PortCounters();
    private final TpacketV2RxRing reader = new TpacketV2RxRing(ring, BLOCK_SIZE, BLOCK_COUNT, FRAME_SIZE, counters);
    private final List<byte[]> frames = new ArrayList<>();
    private final List<Integer> flags = new ArrayList<>();
    private final FrameHandler collect = (buffer, offset, length, frameFlags) ->
    {
        final byte[] frame = new byte[length];
        buffer.getBytes(offset, frame);
        frames.add(frame);
        flags.add(frameFlags);
    };

    private int nextSlot;

    @Test
    void shouldDeliverReadySlotsInOrderAndHandEachBackToTheKernel()
    {
        fill(frame(1, 60), frame(2, 900), frame(3, 100));

        assertThat(reader.read(collect, 10)).isEqualTo(3);

        assertThat(frames).containsExactly(pattern(1, 60), pattern(2, 900), pattern(3, 100));
        assertThat(flags).containsOnly(0);
        for (int slot = 0; slot < 3; slot++)
        {
            assertThat(slotStatus(slot)).as("slot %d", slot).isEqualTo(TP_STATUS_KERNEL);
        }
        assertThat(counters.rxFrames()).isEqualTo(3);
        assertThat(counters.rxBytes()).isEqualTo(60 + 900 + 100);
        assertThat(reader.hasWork()).isFalse();
    }

    @Test
    void shouldSeeEachFrameAsSoonAsItsOwnSlotIsReady()
    {
        fill(frame(1, 64));
        assertThat(reader.hasWork()).isTrue();
        assertThat(reader.read(collect, 10)).isEqualTo(1);
        assertThat(reader.hasWork()).isFalse();

        fill(frame(2, 64));
        assertThat(reader.read(collect, 10)).isEqualTo(1);
        assertThat(frames).containsExactly(pattern(1, 64), pattern(2, 64));
    }

    @Test
    void shouldStopAtTheBatchLimitAndResumeAtTheNextSlot()
    {
        fill(frame(1, 64), frame(2, 64), frame(3, 64), frame(4, 64));

        assertThat(reader.read(collect, 3)).isEqualTo(3);
        assertThat(slotStatus(3)).as("fourth slot untouched").isEqualTo(TP_STATUS_USER);
        assertThat(reader.hasWork()).isTrue();

        assertThat(reader.read(collect, 3)).isEqualTo(1);
        assertThat(frames).containsExactly(pattern(1, 64), pattern(2, 64), pattern(3, 64), pattern(4, 64));
    }

    @Test
    void shouldWaitForSlotsTheKernelStillOwnsAndWrapAroundTheRing()
    {
        assertThat(reader.read(collect, 10)).isZero();
        assertThat(reader.hasWork()).isFalse();

        for (int i = 0; i < 3 * SLOT_COUNT + 1; i++)
        {
            fill(frame(i, 80 + i));
            assertThat(reader.read(collect, 10)).as("frame %d", i).isEqualTo(1);
            assertThat(frames.getLast()).isEqualTo(pattern(i, 80 + i));
        }
        assertThat(frames).hasSize(3 * SLOT_COUNT + 1);
    }

    @Test
    void shouldNeverReadTheUnusedTailOfABlock()
    {
        // Garbage that looks like a ready frame where a fourth slot would be if slots straddled blocks.
        ring.putInt(SLOTS_PER_BLOCK * FRAME_SIZE + TPACKET2_HDR_STATUS_OFFSET, TP_STATUS_USER);
        fill(frame(1, 64), frame(2, 64), frame(3, 64), frame(4, 64));

        assertThat(reader.read(collect, 10)).isEqualTo(4);

        assertThat(frames).containsExactly(pattern(1, 64), pattern(2, 64), pattern(3, 64), pattern(4, 64));
        assertThat(slotStatus(3)).as("first slot of block 1").isEqualTo(TP_STATUS_KERNEL);
    }

    @Test
    void shouldSkipTheHostsOwnOutgoingFramesAndReleaseTheirSlots()
    {
        fill(frame(1, 64), frame(2, 64).packetType(PACKET_OUTGOING), frame(3, 64));

        assertThat(reader.read(collect, 10)).isEqualTo(2);

        assertThat(frames).containsExactly(pattern(1, 64), pattern(3, 64));
        assertThat(counters.rxFrames()).isEqualTo(2);
        assertThat(slotStatus(1)).isEqualTo(TP_STATUS_KERNEL);
    }

    @Test
    void shouldCountAndSkipFramesTruncatedToFitTheSlot()
    {
        fill(frame(1, 64).wireLength(9014), frame(2, 64));

        assertThat(reader.read(collect, 10)).isEqualTo(1);

        assertThat(frames).containsExactly(pattern(2, 64));
        assertThat(counters.rxTruncated()).isEqualTo(1);
        assertThat(slotStatus(0)).isEqualTo(TP_STATUS_KERNEL);
    }

    @Test
    void shouldFlagFramesWhoseChecksumIsLeftForOffload()
    {
        fill(frame(1, 64).status(TP_STATUS_USER | TP_STATUS_CSUMNOTREADY),
            frame(2, 64).status(TP_STATUS_USER | TP_STATUS_LOSING));

        reader.read(collect, 10);

        assertThat(flags).containsExactly(FrameHandler.FLAG_CHECKSUM_NOT_READY, 0);
    }

    @Test
    void shouldNotDeliverAFrameTwiceWhenTheHandlerThrowsAndStillReleaseItsSlot()
    {
        fill(frame(1, 64), frame(2, 64));
        final FrameHandler failing = (buffer, offset, length, frameFlags) ->
        {
            throw new IllegalStateException("handler bug");
        };

        try
        {
            reader.read(failing, 10);
        }
        catch (final IllegalStateException expected)
        {
            // the handler's exception reaches the caller
        }
        assertThat(reader.hasWork()).isTrue();

        assertThat(reader.read(collect, 10)).isEqualTo(1);
        assertThat(frames).containsExactly(pattern(2, 64));
        assertThat(slotStatus(0)).as("slot of the frame whose handler threw").isEqualTo(TP_STATUS_KERNEL);
        assertThat(slotStatus(1)).isEqualTo(TP_STATUS_KERNEL);
    }

    @Test
    void shouldDeliverEveryFrameOnceInOrderForRandomArrivalsAndBatchLimits()
    {
        final long seed = new SplittableRandom().nextLong();
        try
        {
            final SplittableRandom random = new SplittableRandom(seed);
            final List<byte[]> expected = new ArrayList<>();
            int produced = 0;
            int consumed = 0;
            for (int round = 0; round < 2_000; round++)
            {
                // The kernel fills only slots it owns: at most the free ones.
                final int free = SLOT_COUNT - (produced - consumed);
                final int arrivals = random.nextInt(free + 1);
                for (int i = 0; i < arrivals; i++)
                {
                    final SyntheticFrame frame = frame(produced++, 60 + random.nextInt(FRAME_SIZE - MAC_OFFSET - 60 + 1));
                    expected.add(frame.bytes);
                    fill(frame);
                }
                final int limit = 1 + random.nextInt(SLOT_COUNT + 2);
                final int before = frames.size();
                final int delivered = reader.read(collect, limit);
                assertThat(delivered).isEqualTo(Math.min(limit, produced - consumed)).isEqualTo(frames.size() - before);
                consumed += delivered;
            }
            assertThat(frames).containsExactlyElementsOf(expected.subList(0, consumed));
            assertThat(counters.rxFrames()).isEqualTo(consumed);
        }
        catch (final AssertionError ex)
        {
            throw new AssertionError("seed " + seed + ": " + ex.getMessage(), ex);
        }
    }

    @Test
    void shouldRejectASlotLargerThanABlock()
    {
        assertThatThrownBy(() -> new TpacketV2RxRing(ring, 4096, 2, 8192, counters))
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("8192");
    }

    private int slotOffset(final int slot)
    {
        return (slot / SLOTS_PER_BLOCK) * BLOCK_SIZE + (slot % SLOTS_PER_BLOCK) * FRAME_SIZE;
    }

    private int slotStatus(final int slot)
    {
        return ring.getInt(slotOffset(slot % SLOT_COUNT) + TPACKET2_HDR_STATUS_OFFSET);
    }

    /**
     * Write frames into the next slots as the kernel would, status last.
     */
    private void fill(final SyntheticFrame... slotFrames)
    {
        for (final SyntheticFrame frame : slotFrames)
        {
            final int header = slotOffset(nextSlot);
            nextSlot = nextSlot + 1 == SLOT_COUNT ? 0 : nextSlot + 1;
            assertThat(ring.getIntVolatile(header + TPACKET2_HDR_STATUS_OFFSET)).as("slot free").isEqualTo(TP_STATUS_KERNEL);
            ring.setMemory(header, FRAME_SIZE, (byte)0);
            ring.putInt(header + TPACKET2_HDR_LEN_OFFSET, frame.wireLength);
            ring.putInt(header + TPACKET2_HDR_SNAPLEN_OFFSET, frame.bytes.length);
            ring.putShort(header + TPACKET2_HDR_MAC_OFFSET, (short)MAC_OFFSET);
            ring.putShort(header + TPACKET2_HDR_NET_OFFSET, (short)(MAC_OFFSET + ETH_HLEN));
            ring.putShort(header + TPACKET2_SOCKADDR_LL_OFFSET + SOCKADDR_LL_FAMILY_OFFSET, (short)AF_PACKET);
            ring.putByte(header + TPACKET2_SOCKADDR_LL_OFFSET + SOCKADDR_LL_PKTTYPE_OFFSET, (byte)frame.packetType);
            ring.putBytes(header + MAC_OFFSET, frame.bytes);
            ring.putIntVolatile(header + TPACKET2_HDR_STATUS_OFFSET, frame.status);
        }
    }

    private static byte[] pattern(final int marker, final int length)
    {
        final byte[] bytes = new byte[length];
        for (int i = 0; i < length; i++)
        {
            bytes[i] = (byte)(marker * 7 + i);
        }
        return bytes;
    }

    private static SyntheticFrame frame(final int marker, final int length)
    {
        return new SyntheticFrame(pattern(marker, length));
    }

    private static final class SyntheticFrame
    {
        final byte[] bytes;
        int wireLength;
        int status = TP_STATUS_USER;
        int packetType = 0;

        SyntheticFrame(final byte[] bytes)
        {
            this.bytes = bytes;
            this.wireLength = bytes.length;
        }

        SyntheticFrame wireLength(final int length)
        {
            wireLength = length;
            return this;
        }

        SyntheticFrame status(final int value)
        {
            status = value;
            return this;
        }

        SyntheticFrame packetType(final int value)
        {
            packetType = value;
            return this;
        }
    }
}
