package io.netreduce.host.allreduce;

import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.host.rc.MemoryRegion;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RethHeader;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Placement mode: each rank's send and receive regions are the two areas of one memory block in message layout
 * (as the sidecar registers the trainer's shared mapping), messages go out of the input area and results land in
 * the output area with no copy in between. Through the real appliance on MemoryPorts, as NetReduceApplianceTest.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NetReducePlacedAllReduceTest
{
    private static final long SEED = 4321;
    private static final int RING = 5;
    private static final int AREA_MESSAGES = 12;

    /** Rank r's memory block: input area, then output area, each AREA_MESSAGES messages (plus a little slack). */
    private static RingHarness placedRing(final int world, final IntFunction<RcConfig> configs,
        final NetReduceConfig config, final int areaMessages)
    {
        final int areaBytes = areaMessages * config.messageBytes();
        return new RingHarness(world, configs, (endpoint, clock, rank) ->
        {
            final ByteBuffer block = ByteBuffer.allocateDirect(2 * areaBytes + 100);
            final MemoryRegion input = endpoint.registerMemory(block.slice(0, areaBytes));
            final MemoryRegion output = endpoint.registerMemory(block.slice(areaBytes, areaBytes));
            return new RingLink(endpoint, clock, rank, world, input, output);
        });
    }

    /** The trainer's copy in: tensor bytes into the input area's data parts, the last message's tail zeroed. */
    private static void copyIn(final Tensor tensor, final RingLink link, final NetReduceConfig config)
    {
        final UnsafeBuffer input = link.sendRegion().buffer();
        final int data = config.dataBytesPerMessage();
        for (int i = 0, at = 0; at < tensor.byteLength(); i++, at += data)
        {
            final int length = Math.min(data, tensor.byteLength() - at);
            final int place = i * config.messageBytes() + InaHeader.LENGTH;
            input.putBytes(place, tensor.buffer(), tensor.offset() + at, length);
            input.setMemory(place + length, data - length, (byte)0);
        }
    }

    /** The trainer's copy out: the output area's data parts into a fresh tensor. */
    private static Tensor copyOut(final RingLink link, final NetReduceConfig config, final ElementType type,
        final int elements)
    {
        final Tensor result = new Tensor(type, new UnsafeBuffer(ByteBuffer.allocateDirect(elements * type.size())), 0,
            elements);
        final int data = config.dataBytesPerMessage();
        for (int i = 0, at = 0; at < result.byteLength(); i++, at += data)
        {
            result.buffer().putBytes(at, link.receiveRegion().buffer(), i * config.messageBytes() + InaHeader.LENGTH,
                Math.min(data, result.byteLength() - at));
        }
        return result;
    }

    private static DataplaneAgent appliance(final RingHarness ring)
    {
        final MemoryPort port = new MemoryPort("appliance", MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096, 1 << 23);
        final DataplaneAgent appliance = new DataplaneAgent(new DataplaneContext()
            .ports(new ArrayList<PacketPort>(List.of(port)))
            .memoryBudget(64L << 20));
        ring.fabric.redirectRoceTo(ring.fabric.attach(port, 0));
        ring.extraWork = appliance::doWork;
        return appliance;
    }

    /** An appliance on the harness's fabric with the ring of every rank installed. */
    private static DataplaneAgent applianceWithRing(final RingHarness ring, final ElementType type,
        final NetReduceConfig config)
    {
        final DataplaneAgent appliance = appliance(ring);
        final List<RingMember> members = new ArrayList<>();
        for (int r = 0; r < ring.links.length; r++)
        {
            members.add(new RingMember(r, RingHarness.ip(r), ring.links[r].receiveQp().qpn(), RingHarness.mac(r)));
        }
        await(appliance, appliance.proxy().installRing(new RingDefinition(RING, "test", type, config.window(),
            config.msgLen(), config.payloadSize(), members)));
        return appliance;
    }

    /** Placed ops for every rank, each begun on an fp32 tensor of {@code elements} from the seeded pattern. */
    private static NetReduceAllReduce[] beginFp32Call(final RingHarness ring, final NetReduceConfig config,
        final int elements)
    {
        final NetReduceAllReduce[] ops = new NetReduceAllReduce[ring.links.length];
        for (int r = 0; r < ops.length; r++)
        {
            ops[r] = NetReduceAllReduce.placed(ring.links[r], config, AREA_MESSAGES);
            final Tensor mine = new Tensor(ElementType.FP32,
                new UnsafeBuffer(ByteBuffer.allocateDirect(elements * 4)), 0, elements);
            TensorPattern.fill(mine, SEED, r, 0);
            copyIn(mine, ring.links[r], config);
            ops[r].beginPlaced(ops[r].messagesFor(elements * 4));
        }
        return ops;
    }

    @ParameterizedTest(name = "W={0} {1} window={2} drop={3}")
    @CsvSource({
        "2, fp32, 1, 0.02",
        "2, fp32, 8, 0.02",
        "4, fp32, 8, 0.02",
        "4, fp16, 4, 0.02",
        "3, bf16, 8, 0",
        "4, int32, 8, 0",
    })
    void shouldLeaveTheExactRankOrderSumInTheOutputAreaAndTheInputUntouched(
        final int world, final String typeName, final int window, final double drop)
    {
        final ElementType type = ElementType.parse(typeName);
        final int payload = 1024;
        final int msgLen = 4;
        final NetReduceConfig config = new NetReduceConfig(RING, window, msgLen, payload, 2_000_000_000L);
        final int perMessage = config.dataBytesPerMessage() / type.size();
        // Full areas, a padded part of one, a single message, a padded full one: offsets restart at 0 every call
        // while MsgID goes on (4 calls x up to 12 messages: past 2N slots and, over the test, MsgIDs well mixed).
        final int[] elementsPerCall = {AREA_MESSAGES * perMessage, 4 * perMessage + perMessage / 3, 7,
            AREA_MESSAGES * perMessage - 1, AREA_MESSAGES * perMessage};
        try (RingHarness ring = placedRing(world,
            r -> new RcConfig().pmtu(payload).sendDropProbability(drop).faultSeed(SEED * 17 + r), config,
            AREA_MESSAGES))
        {
            final DataplaneAgent appliance = applianceWithRing(ring, type, config);
            final NetReduceAllReduce[] ops = new NetReduceAllReduce[world];
            for (int r = 0; r < world; r++)
            {
                ops[r] = NetReduceAllReduce.placed(ring.links[r], config, AREA_MESSAGES);
                assertThat(ops[r].isPlaced()).isTrue();
            }
            long messages = 0;
            for (int call = 0; call < elementsPerCall.length; call++)
            {
                final int elements = elementsPerCall[call];
                final int callMessages = ops[0].messagesFor(elements * type.size());
                final byte[][] inputBefore = new byte[world][];
                for (int r = 0; r < world; r++)
                {
                    final Tensor mine = new Tensor(type,
                        new UnsafeBuffer(ByteBuffer.allocateDirect(elements * type.size())), 0, elements);
                    TensorPattern.fill(mine, SEED, r, call);
                    copyIn(mine, ring.links[r], config);
                    ops[r].beginPlaced(callMessages);
                }
                for (int r = 0; r < world; r++)
                {
                    // headers are written as messages are posted; the data parts are never written by the op
                    inputBefore[r] = dataParts(ring.links[r].sendRegion().buffer(), config, callMessages);
                }
                ring.runToCompletion(ops, 3_000_000);
                messages += callMessages;
                final int it = call;
                final Arithmetic.Inputs inputs = (rank, index) -> TensorPattern.bits(type, SEED, rank, it, index);
                for (int r = 0; r < world; r++)
                {
                    final RingLink link = ring.links[r];
                    assertThat(dataParts(link.sendRegion().buffer(), config, callMessages))
                        .as("rank %d call %d: input area data", r, call).isEqualTo(inputBefore[r]);
                    for (int i = 0; i < callMessages; i++)
                    {
                        final int place = i * config.messageBytes();
                        assertThat(InaHeader.inetTag(link.receiveRegion().buffer(), place)).isEqualTo(
                            config.resultTag());
                        assertThat(InaHeader.msgId(link.receiveRegion().buffer(), place))
                            .isEqualTo((int)((messages - callMessages + i) & 0xFF));
                        assertThat(InaHeader.inetTag(link.sendRegion().buffer(), place)).isEqualTo(
                            config.inetTag());
                    }
                    final Tensor result = copyOut(link, config, type, elements);
                    for (int i = 0; i < elements; i++)
                    {
                        final int expected = Arithmetic.rankOrderSum(type, world, inputs, i);
                        final int actual = Arithmetic.get(result, i);
                        if (actual != expected)
                        {
                            throw new AssertionError("rank " + r + " call " + call + " element " + i +
                                ": expected 0x" + Integer.toHexString(expected) + " got 0x" +
                                Integer.toHexString(actual));
                        }
                    }
                }
            }
            assertThat(ops[0].messagesPosted()).isEqualTo(messages);
            assertThat(ops[0].calls()).isEqualTo(elementsPerCall.length);
            assertThat(appliance.counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED))
                .isEqualTo(messages * msgLen);
            assertThat(appliance.counters().get(DataplaneCounter.DROP_NOT_A_RETRANSMISSION)).isZero();
            assertThat(appliance.counters().get(DataplaneCounter.RING_RESTARTS)).isZero();
            if (drop > 0)
            {
                long retransmitted = 0;
                for (final RingLink link : ring.links)
                {
                    retransmitted += link.sendQp().counters().retransmittedPackets();
                }
                assertThat(retransmitted).as("go-back-N retransmissions").isPositive();
            }
        }
    }

    @Test
    void shouldCountTheTimeFromAPlacedCallsLastResultToItsLastAck()
    {
        final int payload = 1024;
        final int world = 3;
        final NetReduceConfig config = new NetReduceConfig(RING, 8, 4, payload, 2_000_000_000L);
        try (RingHarness ring = placedRing(world, r -> new RcConfig().pmtu(payload), config, AREA_MESSAGES))
        {
            applianceWithRing(ring, ElementType.FP32, config);
            final NetReduceAllReduce[] ops = beginFp32Call(ring, config, 2 * config.dataBytesPerMessage() / 4);
            ring.runToCompletion(ops, 3_000_000);
            // A rank's results and its successor's come back in the same duty cycle; the successor's ACK of this
            // rank's last write goes back through the appliance after that, a cycle (5 us of the harness's clock)
            // later: the call ends then, and the wait is counted on the manual clock to the nanosecond.
            long waited = 0;
            for (int r = 0; r < world; r++)
            {
                final long calls = ops[r].callsWaitingForAcks();
                assertThat(calls).as("rank %d", r).isBetween(0L, 1L);
                assertThat(ops[r].ackWaitNs() % ring.stepNs).as("rank %d", r).isZero();
                assertThat(ops[r].ackWaitNs()).as("rank %d", r).isBetween(calls * ring.stepNs, calls * 10 * ring.stepNs);
                waited += calls;
            }
            assertThat(waited).as("calls that ended on an ACK").isPositive();
        }
    }

    @Test
    void shouldHaveItsSumsInPlaceBeforeItsOwnWritesAreAcknowledgedAndBeDoneOnlyAfterBoth()
    {
        final int payload = 1024;
        final int world = 3;
        final NetReduceConfig config = new NetReduceConfig(RING, 8, 4, payload, 2_000_000_000L);
        try (RingHarness ring = placedRing(world, r -> new RcConfig().pmtu(payload), config, AREA_MESSAGES))
        {
            applianceWithRing(ring, ElementType.FP32, config);
            final int elements = 2 * config.dataBytesPerMessage() / 4;
            final NetReduceAllReduce[] ops = beginFp32Call(ring, config, elements);
            final boolean[] sawSumsBeforeAcks = new boolean[world];
            for (int step = 0; step < 3_000_000 && !(ops[0].isDone() && ops[1].isDone() && ops[2].isDone()); step++)
            {
                ring.step(ops);
                for (int r = 0; r < world; r++)
                {
                    assertThat(ops[r].isDone()).isEqualTo(ops[r].resultsDone() && ops[r].writesAcknowledged());
                    if (ops[r].resultsDone() && !ops[r].writesAcknowledged())
                    {
                        // what the sidecar answers its trainer on: the sums, checked, in the output area
                        sawSumsBeforeAcks[r] = true;
                        final Tensor result = copyOut(ring.links[r], config, ElementType.FP32, elements);
                        for (int i = 0; i < elements; i++)
                        {
                            assertThat(Arithmetic.get(result, i)).isEqualTo(Arithmetic.rankOrderSum(ElementType.FP32,
                                world, (rank, index) -> TensorPattern.bits(ElementType.FP32, SEED, rank, 0, index), i));
                        }
                    }
                }
            }
            for (int r = 0; r < world; r++)
            {
                assertThat(ops[r].isDone()).as("rank %d", r).isTrue();
                assertThat(sawSumsBeforeAcks[r]).as("rank %d: sums in before its last ACK", r)
                    .isEqualTo(ops[r].callsWaitingForAcks() == 1);
            }
        }
    }

    private static byte[] dataParts(final UnsafeBuffer area, final NetReduceConfig config, final int messages)
    {
        final int data = config.dataBytesPerMessage();
        final byte[] bytes = new byte[messages * data];
        for (int i = 0; i < messages; i++)
        {
            area.getBytes(i * config.messageBytes() + InaHeader.LENGTH, bytes, i * data, data);
        }
        return bytes;
    }

    @Test
    void shouldPostEachMessageFromItsPlaceToTheSuccessorsOutputAreaAndRetransmitTheSameBytes()
    {
        final int payload = 256;
        final int msgLen = 3;
        final int window = 4;
        final NetReduceConfig config = new NetReduceConfig(RING, window, msgLen, payload, 1_000_000_000L);
        final int world = 2;
        try (RingHarness ring = placedRing(world, r -> new RcConfig().pmtu(payload).retransmitTimeoutNs(1_000_000L),
            config, AREA_MESSAGES))
        {
            // RoCE goes to a port where nothing answers (no results, no ACKs): the RC layer retransmits.
            final MemoryPort nobody = new MemoryPort("nobody", MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096, 1 << 23);
            ring.fabric.redirectRoceTo(ring.fabric.attach(nobody, 0));
            final NetReduceAllReduce[] ops = beginFp32Call(ring, config, 6 * config.dataBytesPerMessage() / 4 - 3);
            for (int i = 0; i < 2400; i++) // 12 ms: the 1 ms timeout fires, doubling, a few times
            {
                ring.step(ops);
            }
            final RoceFrame frame = new RoceFrame();
            final Map<Long, byte[]> firstCopy = new HashMap<>();
            final Map<Long, Integer> copies = new HashMap<>();
            final Map<Integer, Integer> firstPsn = new HashMap<>();
            nobody.receive((buffer, offset, length, flags) ->
            {
                assertThat(frame.wrap(buffer, offset, length)).isEqualTo(RoceFrame.OK);
                final int rank = (buffer.getByte(frame.l3Offset() + Ipv4Header.SRC_OFFSET + 3) & 0xFF) - 1;
                firstPsn.putIfAbsent(rank, frame.psn());
                final int index = (frame.psn() - firstPsn.get(rank)) & 0xFF_FFFF;
                final int message = index / msgLen;
                final int position = index % msgLen;
                final byte[] bytes = new byte[frame.payloadLength()];
                buffer.getBytes(frame.payloadOffset(), bytes);
                // every packet, first and retransmitted, is the input area's bytes at its place, header included
                final byte[] area = new byte[payload];
                ring.links[rank].sendRegion().buffer().getBytes(message * config.messageBytes() + position * payload,
                    area);
                assertThat(bytes).as("rank %d message %d packet %d", rank, message, position).isEqualTo(area);
                if (position == 0)
                {
                    assertThat(frame.opcode()).isEqualTo(Opcode.RDMA_WRITE_FIRST);
                    assertThat(InaHeader.msgId(buffer, frame.payloadOffset())).isEqualTo(message);
                    final MemoryRegion successorOutput = ring.links[(rank + 1) % world].receiveRegion();
                    assertThat(RethHeader.virtualAddress(buffer, frame.extensionOffset()))
                        .isEqualTo(successorOutput.virtualAddress() + (long)message * config.messageBytes());
                }
                final long key = (long)rank << 32 | index;
                final byte[] first = firstCopy.putIfAbsent(key, bytes);
                if (first != null)
                {
                    assertThat(bytes).isEqualTo(first);
                }
                copies.merge(key, 1, Integer::sum);
            }, 100_000);
            // The window holds each rank at N messages, every one sent more than once.
            assertThat(firstCopy).hasSize(world * window * msgLen);
            assertThat(copies.values()).allMatch(n -> n >= 2);
            assertThat(ops[0].isDone()).isFalse();
        }
    }

    @Test
    void shouldFailWithAClearReasonWhenResultsArriveUnaggregated()
    {
        final int world = 3;
        final int payload = 1024;
        final NetReduceConfig config = new NetReduceConfig(RING, 2, 4, payload, 2_000_000_000L);
        try (RingHarness ring = placedRing(world, r -> new RcConfig().pmtu(payload), config, AREA_MESSAGES))
        {
            appliance(ring); // no ring installed: the traffic passes through
            final NetReduceAllReduce[] ops = new NetReduceAllReduce[world];
            for (int r = 0; r < world; r++)
            {
                ops[r] = NetReduceAllReduce.placed(ring.links[r], config, AREA_MESSAGES);
                ops[r].beginPlaced(5);
            }
            assertThatThrownBy(() -> ring.runToCompletion(ops, 3_000_000))
                .isInstanceOf(AllReduceException.class)
                .hasMessageContaining("arrived unaggregated")
                .hasMessageContaining("ring " + RING + " is not installed on the appliance");
        }
    }

    @Test
    void shouldRefuseCallsThatDoNotFitTheMode()
    {
        final int payload = 512;
        final NetReduceConfig config = new NetReduceConfig(RING, 2, 2, payload, 1_000_000_000L);
        try (RingHarness ring = placedRing(2, r -> new RcConfig().pmtu(payload), config, 3))
        {
            assertThatThrownBy(() -> NetReduceAllReduce.placed(ring.links[0], config, 4))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("must each hold 4 messages of 1024 bytes");
            assertThatThrownBy(() -> NetReduceAllReduce.placed(ring.links[0], config, 0))
                .isInstanceOf(IllegalArgumentException.class);
            final NetReduceAllReduce op = NetReduceAllReduce.placed(ring.links[0], config, 3);
            assertThatThrownBy(() -> op.beginPlaced(4))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("1..3 messages");
            assertThatThrownBy(() -> op.beginPlaced(0)).isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> op.begin(new Tensor(ElementType.FP32,
                new UnsafeBuffer(ByteBuffer.allocateDirect(16)), 0, 4)))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("beginPlaced");
        }
        try (RingHarness ring = new RingHarness(2, r -> new RcConfig().pmtu(payload), config.regionBytes(),
            config.regionBytes()))
        {
            final NetReduceAllReduce slotted = new NetReduceAllReduce(ring.links[0], config);
            assertThat(slotted.isPlaced()).isFalse();
            assertThatThrownBy(() -> slotted.beginPlaced(1))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("begin(tensor)");
        }
    }

    private static <T> T await(final DataplaneAgent agent, final CompletableFuture<T> reply)
    {
        for (int i = 0; i < 1000 && !reply.isDone(); i++)
        {
            agent.doWork();
        }
        assertThat(reply).isCompleted();
        return reply.join();
    }
}
