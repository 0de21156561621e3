package io.netreduce.host.allreduce;

import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.host.rc.RcConfig;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Whole rings through the real appliance: W software RC endpoints on MemoryPorts behind the in-test switch, which
 * redirects their RoCE frames to the dataplane agent's port (one-armed) and forwards the agent's result frames by
 * MAC, as in the namespace test bed. Every rank's result must be the appliance's rank-order sum, bit for bit.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NetReduceApplianceTest
{
    private static final long SEED = 1234;
    private static final int RING = 3;

    @ParameterizedTest(name = "W={0} {1} window={2} drop={3}")
    @CsvSource({
        "2, fp32, 1, 0.01",
        "2, fp32, 8, 0.01",
        "2, fp16, 1, 0.01",
        "2, fp16, 8, 0.01",
        "4, fp32, 1, 0.01",
        "4, fp32, 8, 0.01",
        "4, fp16, 1, 0.01",
        "4, fp16, 8, 0.01",
        "8, fp32, 1, 0.01",
        "8, fp32, 8, 0.01",
        "8, fp16, 1, 0.01",
        "8, fp16, 8, 0.01",
        "4, bf16, 8, 0",
        "4, int32, 4, 0",
    })
    void shouldGiveEveryRankTheExactRankOrderSumThroughTheAppliance(
        final int world, final String typeName, final int window, final double drop)
    {
        final ElementType type = ElementType.parse(typeName);
        final int payload = 1024;
        final int msgLen = 4;
        final NetReduceConfig config = new NetReduceConfig(RING, window, msgLen, payload, 2_000_000_000L);
        // 40.5 messages per call: the last one is padded.
        final int elements = (int)(40.5 * config.dataBytesPerMessage()) / type.size();
        try (RingHarness ring = new RingHarness(world,
            r -> new RcConfig().pmtu(payload).sendDropProbability(drop).faultSeed(SEED * 31 + r),
            config.regionBytes(), config.regionBytes()))
        {
            final DataplaneAgent appliance = applianceWithoutRings(ring);
            final List<RingMember> members = new ArrayList<>();
            for (int r = 0; r < world; r++)
            {
                members.add(new RingMember(r, RingHarness.ip(r), ring.links[r].receiveQp().qpn(),
                    RingHarness.mac(r)));
            }
            await(appliance, appliance.proxy().installRing(new RingDefinition(RING, "test",
                type, window, msgLen, payload, members)));

            final NetReduceAllReduce[] ops = new NetReduceAllReduce[world];
            for (int r = 0; r < world; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.links[r], config);
            }
            for (int iteration = 0; iteration < 3; iteration++)
            {
                final Tensor[] tensors = new Tensor[world];
                for (int r = 0; r < world; r++)
                {
                    tensors[r] = new Tensor(type, new UnsafeBuffer(ByteBuffer.allocateDirect(elements * type.size())),
                        0, elements);
                    TensorPattern.fill(tensors[r], SEED, r, iteration);
                    ops[r].begin(tensors[r]);
                }
                ring.runToCompletion(ops, 3_000_000);
                final int it = iteration;
                final Arithmetic.Inputs inputs = (rank, index) -> TensorPattern.bits(type, SEED, rank, it, index);
                for (int i = 0; i < elements; i++)
                {
                    final int expected = Arithmetic.rankOrderSum(type, world, inputs, i);
                    for (int r = 0; r < world; r++)
                    {
                        final int actual = Arithmetic.get(tensors[r], i);
                        if (actual != expected)
                        {
                            throw new AssertionError("rank " + r + " iteration " + iteration + " element " + i +
                                ": expected 0x" + Integer.toHexString(expected) + " got 0x" +
                                Integer.toHexString(actual) + " (seed " + SEED + ")");
                        }
                    }
                }
            }
            final long messages = 3L * ops[0].messagesFor(elements * type.size());
            assertThat(ops[0].messagesPosted()).isEqualTo(messages);
            assertThat(appliance.counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED))
                .isEqualTo(messages * msgLen);
            if (drop > 0)
            {
                long dropped = 0;
                for (final RingLink link : ring.links)
                {
                    dropped += link.sendQp().counters().sendDrops() + link.receiveQp().counters().sendDrops();
                }
                assertThat(dropped).as("packets (requests or ACKs) dropped at the endpoints").isPositive();
            }
        }
    }

    @Test
    void shouldFailWithAClearReasonWhenTheApplianceDoesNotKnowTheRing()
    {
        final int world = 3;
        final int payload = 1024;
        final NetReduceConfig config = new NetReduceConfig(RING, 2, 4, payload, 2_000_000_000L);
        final int elements = 8 * config.dataBytesPerMessage() / Float.BYTES;
        try (RingHarness ring = new RingHarness(world, r -> new RcConfig().pmtu(payload),
            config.regionBytes(), config.regionBytes()))
        {
            final DataplaneAgent appliance = applianceWithoutRings(ring);
            final NetReduceAllReduce[] ops = new NetReduceAllReduce[world];
            for (int r = 0; r < world; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.links[r], config);
                ops[r].begin(filledTensor(elements, r));
            }
            assertThatThrownBy(() -> ring.runToCompletion(ops, 3_000_000))
                .isInstanceOf(AllReduceException.class)
                .hasMessageContaining("arrived unaggregated")
                .hasMessageContaining("ring " + RING + " is not installed on the appliance");
            assertThat(appliance.counters().get(DataplaneCounter.PASS_THROUGH_UNKNOWN_RING)).isPositive();
        }
    }

    @Test
    void shouldSendItsOwnMessagesBeforeFailingOnAnUnaggregatedMessageThatArrivedBeforeItsCall()
    {
        final int world = 2;
        final int payload = 1024;
        final NetReduceConfig config = new NetReduceConfig(RING, 2, 4, payload, 2_000_000_000L);
        final int elements = config.dataBytesPerMessage() / Float.BYTES;
        try (RingHarness ring = new RingHarness(world, r -> new RcConfig().pmtu(payload),
            config.regionBytes(), config.regionBytes()))
        {
            applianceWithoutRings(ring);
            final NetReduceAllReduce[] ops = new NetReduceAllReduce[world];
            final Tensor[] tensors = new Tensor[world];
            for (int r = 0; r < world; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.links[r], config);
                tensors[r] = filledTensor(elements, r);
            }
            // Rank 0 calls first; its message passes the appliance unaggregated and waits, completed, at rank 1,
            // whose trainer has not called yet.
            ops[0].begin(tensors[0]);
            final NetReduceAllReduce[] first = {ops[0]};
            for (int i = 0; i < 2_000; i++)
            {
                ring.step(first);
            }
            assertThat(ops[0].isDone()).isFalse();

            // Rank 1's call posts its message; the duty cycle after it sends it, and only then does its poll look
            // at what had arrived and fail.
            ops[1].begin(tensors[1]);
            assertThat(ops[1].messagesPosted()).isEqualTo(1);
            assertThatThrownBy(() -> ring.step(new NetReduceAllReduce[] {ops[1]}))
                .isInstanceOf(AllReduceException.class)
                .hasMessageContaining("arrived unaggregated");
            // Sent before it failed (a process that ends on the failure has sent it), so rank 0 fails for the same
            // reason now, not when its call times out waiting for a result from rank 1.
            assertThat(ring.links[1].sendQp().counters().packetsSent()).isPositive();
            assertThatThrownBy(() ->
            {
                for (int i = 0; i < 100_000; i++)
                {
                    ring.step(first);
                }
            })
                .isInstanceOf(AllReduceException.class)
                .hasMessageContaining("arrived unaggregated");
        }
    }

    /**
     * An appliance on the ring's fabric, every RoCE frame redirected to it and run every step, with no ring
     * installed yet: until one is, ring traffic passes through unaggregated.
     */
    static DataplaneAgent applianceWithoutRings(final RingHarness ring)
    {
        final MemoryPort appliancePort = new MemoryPort("appliance", MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096,
            1 << 23);
        final DataplaneAgent appliance = new DataplaneAgent(new DataplaneContext()
            .ports(new ArrayList<PacketPort>(List.of(appliancePort)))
            .memoryBudget(64L << 20));
        ring.fabric.redirectRoceTo(ring.fabric.attach(appliancePort, 0));
        ring.extraWork = appliance::doWork;
        return appliance;
    }

    private static Tensor filledTensor(final int elements, final int rank)
    {
        final Tensor tensor = new Tensor(ElementType.FP32,
            new UnsafeBuffer(ByteBuffer.allocateDirect(elements * Float.BYTES)), 0, elements);
        TensorPattern.fill(tensor, SEED, rank, 0);
        return tensor;
    }

    static <T> T await(final DataplaneAgent agent, final CompletableFuture<T> reply)
    {
        for (int i = 0; i < 1000 && !reply.isDone(); i++)
        {
            agent.doWork();
        }
        assertThat(reply).isCompleted();
        return reply.join();
    }
}
