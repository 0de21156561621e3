package io.netreduce.host.allreduce;

import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.host.rc.RcConfig;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The worker side on its own: what the flow-control module puts on the wire and how it behaves with no appliance.
 * Whole-ring results through the real appliance are in the appliance tests.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NetReduceAllReduceTest
{
    private static final int PAYLOAD = 256;
    private static final int MSG_LEN = 3;
    private static final int WINDOW = 4;
    private static final int RING = 9;

    @Test
    void shouldSendAtMostWindowMessagesOfMsgLenFullPacketsWithTheInaHeaderFirst()
    {
        final NetReduceConfig config = new NetReduceConfig(RING, WINDOW, MSG_LEN, PAYLOAD, 1_000_000_000L);
        final int world = 2;
        try (RingHarness ring = new RingHarness(world, r -> new RcConfig().pmtu(PAYLOAD), config.regionBytes(),
            config.regionBytes()))
        {
            final MemoryPort appliance = new MemoryPort("appliance");
            ring.fabric.redirectRoceTo(ring.fabric.attach(appliance, 0));
            final NetReduceAllReduce[] ops = new NetReduceAllReduce[world];
            final Tensor[] tensors = new Tensor[world];
            final int elements = 10 * config.dataBytesPerMessage() / 4 - 5; // 10 messages, the last one padded
            for (int r = 0; r < world; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.links[r], config);
                tensors[r] = new Tensor(ElementType.FP32, new UnsafeBuffer(ByteBuffer.allocateDirect(elements * 4)), 0,
                    elements);
                TensorPattern.fill(tensors[r], 5, r, 0);
                assertThat(ops[r].messagesFor(tensors[r].byteLength())).isEqualTo(10);
                ops[r].begin(tensors[r]);
            }
            // Well below the 4 ms retransmission timeout: every packet seen once.
            for (int i = 0; i < 200; i++)
            {
                ring.step(ops);
            }

            final RoceFrame frame = new RoceFrame();
            final Map<Integer, Integer> packetsByRank = new HashMap<>();
            final Map<Integer, Integer> firstPsnByRank = new HashMap<>();
            appliance.receive((buffer, offset, length, flags) ->
            {
                assertThat(frame.wrap(buffer, offset, length)).isEqualTo(RoceFrame.OK);
                final int rank = (buffer.getByte(frame.l3Offset() + Ipv4Header.SRC_OFFSET + 3) & 0xFF) - 1;
                final int index = packetsByRank.merge(rank, 1, Integer::sum) - 1;
                firstPsnByRank.putIfAbsent(rank, frame.psn());
                assertThat(frame.psn()).isEqualTo((firstPsnByRank.get(rank) + index) & 0xFF_FFFF);
                assertThat(frame.payloadLength()).isEqualTo(PAYLOAD);
                final int message = index / MSG_LEN;
                final int position = index % MSG_LEN;
                final int payload = frame.payloadOffset();
                final int expectedOpcode = position == 0 ? Opcode.RDMA_WRITE_FIRST :
                    position == MSG_LEN - 1 ? Opcode.RDMA_WRITE_LAST_WITH_IMMEDIATE : Opcode.RDMA_WRITE_MIDDLE;
                assertThat(frame.opcode()).isEqualTo(expectedOpcode);
                final int dataOffsetInMessage;
                if (position == 0)
                {
                    assertThat(InaHeader.inetTag(buffer, payload)).isEqualTo(InaHeader.INET_TAG);
                    assertThat(InaHeader.ringId(buffer, payload)).isEqualTo(RING);
                    assertThat(InaHeader.msgId(buffer, payload)).isEqualTo(message);
                    assertThat(InaHeader.msgLen(buffer, payload)).isEqualTo(MSG_LEN);
                    assertThat(InaHeader.rank(buffer, payload)).isEqualTo(rank);
                    dataOffsetInMessage = 0;
                }
                else
                {
                    dataOffsetInMessage = position * PAYLOAD - InaHeader.LENGTH;
                }
                final int dataStart = position == 0 ? payload + InaHeader.LENGTH : payload;
                final int dataLength = position == 0 ? PAYLOAD - InaHeader.LENGTH : PAYLOAD;
                final int tensorOffset = message * config.dataBytesPerMessage() + dataOffsetInMessage;
                for (int i = 0; i < dataLength; i += 4)
                {
                    assertThat(buffer.getInt(dataStart + i))
                        .isEqualTo(tensors[rank].buffer().getInt(tensorOffset + i));
                }
            }, 10_000);

            // No results come back, so the window stops each rank after N messages.
            assertThat(packetsByRank).containsOnlyKeys(0, 1);
            assertThat(packetsByRank.get(0)).isEqualTo(WINDOW * MSG_LEN);
            assertThat(packetsByRank.get(1)).isEqualTo(WINDOW * MSG_LEN);
            assertThat(ops[0].messagesPosted()).isEqualTo(WINDOW);
            assertThat(ops[0].isDone()).isFalse();
        }
    }

    @Test
    void shouldFailWithClearErrorWithinTheTimeoutWhenNoApplianceAnswers()
    {
        final NetReduceConfig config = new NetReduceConfig(RING, 8, 4, 1024, 50_000_000L);
        final int world = 4;
        try (RingHarness ring = new RingHarness(world, r -> new RcConfig().pmtu(1024), config.regionBytes(),
            config.regionBytes()))
        {
            // The switch redirects RoCE to a port where no appliance runs: the packets vanish.
            ring.fabric.redirectRoceTo(ring.fabric.attach(new MemoryPort("nobody"), 0));
            final NetReduceAllReduce[] ops = new NetReduceAllReduce[world];
            for (int r = 0; r < world; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.links[r], config);
                ops[r].begin(new Tensor(ElementType.FP32, new UnsafeBuffer(ByteBuffer.allocateDirect(1 << 16)), 0,
                    1 << 14));
            }
            final long start = ring.clock.nanoTime();
            assertThatThrownBy(() -> ring.runToCompletion(ops, 1_000_000))
                .isInstanceOf(AllReduceException.class)
                .hasMessageContaining("no result from the appliance for 50 ms on ring 9")
                .hasMessageContaining("0 of 17 messages of this call answered");
            final long elapsed = ring.clock.nanoTime() - start;
            assertThat(elapsed).isBetween(50_000_000L, 60_000_000L);
            assertThatThrownBy(() -> ops[0].begin(new Tensor(ElementType.FP32,
                new UnsafeBuffer(ByteBuffer.allocateDirect(16)), 0, 4)))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("failed earlier");
        }
    }

    @Test
    void shouldRefuseAPayloadSizeThatDiffersFromThePmtu()
    {
        final NetReduceConfig config = new NetReduceConfig(RING, 2, 2, 512, 1_000_000L);
        try (RingHarness ring = new RingHarness(2, r -> new RcConfig().pmtu(1024), config.regionBytes(),
            config.regionBytes()))
        {
            assertThatThrownBy(() -> new NetReduceAllReduce(ring.links[0], config))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("must equal the PMTU 1024");
        }
    }
}
