package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static io.netreduce.protocol.port.LinuxPacketAbi.*;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The V3 block walker over synthetic blocks laid out as the kernel lays them out (tpacket_block_desc, then
 * tpacket3_hdr + sockaddr_ll + frame, each frame 16-byte aligned and chained by tp_next_offset).
 */
class TpacketV3RxRingTest
{
    private static final int BLOCK_SIZE = 4096;
    private static final int BLOCK_COUNT = 3;
    /** Where frame data starts after its header; the kernel's value depends on alignment, any value must work. */
    private static final int MAC_OFFSET = 82;

    private final UnsafeBuffer ring = new UnsafeBuffer(new byte[BLOCK_SIZE * BLOCK_COUNT]);
    private final PortCounters counters = new PortCounters();
    private final TpacketV3RxRing reader = new TpacketV3RxRing(ring, BLOCK_SIZE, BLOCK_COUNT, 2048, counters);
    private final List<byte[]> frames = new ArrayList<>();
    private final List<Integer> flags = new ArrayList<>();
    private final FrameHandler collect = (buffer, offset, length, frameFlags) ->
    {
        final byte[] frame = new byte[length];
        buffer.getBytes(offset, frame);
        frames.add(frame);
        flags.add(frameFlags);
    };

    @Test
    void shouldDeliverReadyBlocksInOrderAndHandThemBackToTheKernel()
    {
        fillBlock(0, frame(1, 60), frame(2, 1514));
        fillBlock(1, frame(3, 100));

        assertThat(reader.read(collect, 10)).isEqualTo(3);

        assertThat(frames).containsExactly(pattern(1, 60), pattern(2, 1514), pattern(3, 100));
        assertThat(flags).containsOnly(0);
        assertThat(blockStatus(0)).isEqualTo(TP_STATUS_KERNEL);
        assertThat(blockStatus(1)).isEqualTo(TP_STATUS_KERNEL);
        assertThat(counters.rxFrames()).isEqualTo(3);
        assertThat(counters.rxBytes()).isEqualTo(60 + 1514 + 100);
    }

    @Test
    void shouldStopMidBlockAtTheBatchLimitAndResumeThere()
    {
        fillBlock(0, frame(1, 64), frame(2, 64), frame(3, 64));

        assertThat(reader.read(collect, 2)).isEqualTo(2);
        assertThat(blockStatus(0)).as("block still held").isEqualTo(TP_STATUS_USER);
        assertThat(reader.hasWork()).isTrue();

        assertThat(reader.read(collect, 2)).isEqualTo(1);
        assertThat(blockStatus(0)).isEqualTo(TP_STATUS_KERNEL);
        assertThat(frames).containsExactly(pattern(1, 64), pattern(2, 64), pattern(3, 64));
    }

    @Test
    void shouldWaitForBlocksTheKernelStillOwnsAndWrapAroundTheRing()
    {
        assertThat(reader.read(collect, 10)).isZero();
        assertThat(reader.hasWork()).isFalse();

        for (int round = 0; round < 2; round++)
        {
            for (int block = 0; block < BLOCK_COUNT; block++)
            {
                final int marker = round * BLOCK_COUNT + block;
                fillBlock(block, frame(marker, 80));
                assertThat(reader.read(collect, 10)).isEqualTo(1);
                assertThat(frames.getLast()).isEqualTo(pattern(marker, 80));
            }
        }
        assertThat(frames).hasSize(2 * BLOCK_COUNT);
    }

    @Test
    void shouldSkipTheHostsOwnOutgoingFrames()
    {
        fillBlock(0, frame(1, 64), frame(2, 64).packetType(PACKET_OUTGOING), frame(3, 64));

        assertThat(reader.read(collect, 10)).isEqualTo(2);

        assertThat(frames).containsExactly(pattern(1, 64), pattern(3, 64));
        assertThat(counters.rxFrames()).isEqualTo(2);
    }

    @Test
    void shouldCountAndSkipFramesTruncatedToFitTheBlock()
    {
        fillBlock(0, frame(1, 64).wireLength(9014), frame(2, 64));

        assertThat(reader.read(collect, 10)).isEqualTo(1);

        assertThat(frames).containsExactly(pattern(2, 64));
        assertThat(counters.rxTruncated()).isEqualTo(1);
    }

    @Test
    void shouldFlagFramesWhoseChecksumIsLeftForOffload()
    {
        fillBlock(0, frame(1, 64).status(TP_STATUS_USER | TP_STATUS_CSUMNOTREADY), frame(2, 64).status(TP_STATUS_USER));

        reader.read(collect, 10);

        assertThat(flags).containsExactly(FrameHandler.FLAG_CHECKSUM_NOT_READY, 0);
    }

    @Test
    void shouldHandBackABlockWithNoFrames()
    {
        fillBlock(0);
        fillBlock(1, frame(7, 64));

        assertThat(reader.read(collect, 10)).isEqualTo(1);

        assertThat(blockStatus(0)).isEqualTo(TP_STATUS_KERNEL);
        assertThat(frames).containsExactly(pattern(7, 64));
    }

    @Test
    void shouldNotDeliverAFrameTwiceWhenTheHandlerThrows()
    {
        fillBlock(0, frame(1, 64), frame(2, 64));
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

        assertThat(reader.read(collect, 10)).isEqualTo(1);
        assertThat(frames).containsExactly(pattern(2, 64));
    }

    private int blockStatus(final int block)
    {
        return ring.getInt(block * BLOCK_SIZE + BLOCK_DESC_BLOCK_STATUS_OFFSET);
    }

    private void fillBlock(final int block, final SyntheticFrame... blockFrames)
    {
        final int base = block * BLOCK_SIZE;
        ring.setMemory(base, BLOCK_SIZE, (byte)0);
        ring.putInt(base + BLOCK_DESC_VERSION_OFFSET, TPACKET_V3);
        ring.putInt(base + BLOCK_DESC_NUM_PKTS_OFFSET, blockFrames.length);
        ring.putInt(base + BLOCK_DESC_OFFSET_TO_FIRST_PKT_OFFSET, BLOCK_DESC_SIZE);
        int header = base + BLOCK_DESC_SIZE;
        for (int i = 0; i < blockFrames.length; i++)
        {
            final SyntheticFrame frame = blockFrames[i];
            final int next = align16(MAC_OFFSET + frame.bytes.length);
            ring.putInt(header + TPACKET3_HDR_NEXT_OFFSET_OFFSET, i == blockFrames.length - 1 ? 0 : next);
            ring.putInt(header + TPACKET3_HDR_SNAPLEN_OFFSET, frame.bytes.length);
            ring.putInt(header + TPACKET3_HDR_LEN_OFFSET, frame.wireLength);
            ring.putInt(header + TPACKET3_HDR_STATUS_OFFSET, frame.status);
            ring.putShort(header + TPACKET3_HDR_MAC_OFFSET, (short)MAC_OFFSET);
            ring.putShort(header + TPACKET3_SOCKADDR_LL_OFFSET + SOCKADDR_LL_FAMILY_OFFSET, (short)AF_PACKET);
            ring.putByte(header + TPACKET3_SOCKADDR_LL_OFFSET + SOCKADDR_LL_PKTTYPE_OFFSET, (byte)frame.packetType);
            ring.putBytes(header + MAC_OFFSET, frame.bytes);
            header += next;
        }
        ring.putIntVolatile(base + BLOCK_DESC_BLOCK_STATUS_OFFSET, TP_STATUS_USER);
    }

    private static int align16(final int value)
    {
        return (value + TPACKET_ALIGNMENT - 1) & -TPACKET_ALIGNMENT;
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
