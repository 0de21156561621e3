package io.netreduce.host.allreduce;

import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.UdpHeader;
import org.agrona.concurrent.CachedNanoClock;
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
 * Several aggregation trees per job (PANAMA §4.1) through real appliances on memory ports: W ranks, T rings of the
 * same ranks, one appliance per ring, and a switch that steers each tree's RoCEv2 to its appliance by the tree's UDP
 * source port (the bed's per-tree ACL). Message k of a call goes to tree k mod T; every rank ends with the exact
 * rank-order sum, each appliance completes exactly its tree's positions and sees nothing of the other trees, and a
 * tree's window moves on its own tree's marks only.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class MultiTreeAllReduceTest
{
    private static final long SEED = 1234;
    private static final int FIRST_RING = 20;
    private static final int MSG_LEN = 4;
    private static final int PAYLOAD = 1024;

    /** W ranks on T trees: endpoints, links, appliances and the switch between them. */
    private static final class Trees implements AutoCloseable
    {
        final CachedNanoClock clock = new CachedNanoClock();
        final TestSwitch fabric = new TestSwitch();
        final RcEndpoint[] endpoints;
        final DataplaneAgent[] appliances;
        final MultiTreeAllReduce[] ops;
        final NetReduceConfig[] configs;

        Trees(final int world, final int trees, final int window, final ElementType type, final double drop,
            final CongestionControl control)
        {
            clock.update(1_000_000_000L);
            endpoints = new RcEndpoint[world];
            appliances = new DataplaneAgent[trees];
            ops = new MultiTreeAllReduce[world];
            configs = new NetReduceConfig[trees];
            for (int r = 0; r < world; r++)
            {
                final MemoryPort port = new MemoryPort("w" + r, MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096, 1 << 23);
                fabric.attach(port, RingHarness.mac(r));
                endpoints[r] = new RcEndpoint(port, new RcConfig().pmtu(PAYLOAD).sendDropProbability(drop)
                    .faultSeed(SEED * 31 + r), clock, RingHarness.ip(r), RingHarness.mac(r));
            }
            final RingLink[][] links = new RingLink[trees][world];
            for (int t = 0; t < trees; t++)
            {
                configs[t] = new NetReduceConfig(FIRST_RING + t, window, MSG_LEN, PAYLOAD, 2_000_000_000L)
                    .withCongestion(control);
                for (int r = 0; r < world; r++)
                {
                    links[t][r] = new RingLink(endpoints[r], clock, r, world, configs[t].regionBytes(),
                        configs[t].regionBytes()).udpSourcePort(MultiTreeAllReduce.udpSourcePort(t));
                }
                for (int r = 0; r < world; r++)
                {
                    links[t][r].connect(links[t][(r + 1) % world].receiveInfo(),
                        links[t][(r + world - 1) % world].sendInfo());
                }
                final MemoryPort appliancePort = new MemoryPort("tree" + t, MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096,
                    1 << 23);
                appliances[t] = new DataplaneAgent(new DataplaneContext()
                    .ports(new ArrayList<PacketPort>(List.of(appliancePort)))
                    .memoryBudget(64L << 20));
                final int switchPort = fabric.attach(appliancePort, 0);
                if (t == 0)
                {
                    // What no tree claims goes to the first appliance, as on the bed (its default redirect).
                    fabric.redirectRoceTo(switchPort);
                }
                fabric.redirectRoceFromSourcePort(MultiTreeAllReduce.udpSourcePort(t), switchPort);
                final List<RingMember> members = new ArrayList<>();
                for (int r = 0; r < world; r++)
                {
                    members.add(new RingMember(r, RingHarness.ip(r), links[t][r].receiveQp().qpn(),
                        RingHarness.mac(r)));
                }
                await(appliances[t], appliances[t].proxy().installRing(new RingDefinition(FIRST_RING + t,
                    "tree" + t, type, window, MSG_LEN, PAYLOAD, members)));
            }
            for (int r = 0; r < world; r++)
            {
                final NetReduceAllReduce[] perTree = new NetReduceAllReduce[trees];
                for (int t = 0; t < trees; t++)
                {
                    perTree[t] = new NetReduceAllReduce(links[t][r], configs[t]);
                }
                ops[r] = new MultiTreeAllReduce(perTree);
            }
        }

        void call(final Tensor[] tensors)
        {
            for (int r = 0; r < ops.length; r++)
            {
                ops[r].begin(tensors[r]);
            }
            for (int step = 0; ; step++)
            {
                boolean done = true;
                for (final MultiTreeAllReduce op : ops)
                {
                    done &= op.isDone();
                }
                if (done)
                {
                    return;
                }
                assertThat(step).as("steps").isLessThan(3_000_000);
                clock.advance(5_000);
                for (final RcEndpoint endpoint : endpoints)
                {
                    endpoint.doWork();
                }
                fabric.doWork();
                for (final DataplaneAgent appliance : appliances)
                {
                    appliance.doWork();
                }
                fabric.doWork();
                for (final MultiTreeAllReduce op : ops)
                {
                    op.poll();
                }
            }
        }

        @Override
        public void close()
        {
            for (final RcEndpoint endpoint : endpoints)
            {
                if (endpoint != null)
                {
                    endpoint.close();
                }
            }
        }
    }

    private static Tensor[] inputs(final ElementType type, final int world, final int elements, final int iteration)
    {
        final Tensor[] tensors = new Tensor[world];
        for (int r = 0; r < world; r++)
        {
            tensors[r] = new Tensor(type, new UnsafeBuffer(ByteBuffer.allocateDirect(elements * type.size())), 0,
                elements);
            TensorPattern.fill(tensors[r], SEED, r, iteration);
        }
        return tensors;
    }

    private static void assertRankOrderSum(final Tensor[] tensors, final int iteration)
    {
        final ElementType type = tensors[0].type();
        final Arithmetic.Inputs inputs = (rank, index) -> TensorPattern.bits(type, SEED, rank, iteration, index);
        for (int e = 0; e < tensors[0].elements(); e++)
        {
            final int expected = Arithmetic.rankOrderSum(type, tensors.length, inputs, e);
            for (int r = 0; r < tensors.length; r++)
            {
                final int actual = Arithmetic.get(tensors[r], e);
                if (actual != expected)
                {
                    throw new AssertionError("rank " + r + " iteration " + iteration + " element " + e +
                        ": expected 0x" + Integer.toHexString(expected) + " got 0x" + Integer.toHexString(actual));
                }
            }
        }
    }

    @ParameterizedTest(name = "W={0} T={1} {2} window={3} drop={4} messages={5}")
    @CsvSource({
        "4, 2, fp32, 8, 0, 40.5",
        "4, 2, fp16, 8, 0.01, 40.5",
        "2, 3, fp32, 4, 0, 31.25",
        "3, 2, int32, 1, 0.01, 9",
        "4, 4, bf16, 8, 0, 2.5",
    })
    void shouldSpreadMessagesRoundRobinOverTheTreesWithEveryResultExact(
        final int world, final int trees, final String typeName, final int window, final double drop,
        final double messages)
    {
        final ElementType type = ElementType.parse(typeName);
        try (Trees job = new Trees(world, trees, window, type, drop, CongestionControl.DEFAULT))
        {
            final int elements = (int)(messages * job.configs[0].dataBytesPerMessage()) / type.size();
            final int total = job.ops[0].tree(0).messagesFor(elements * type.size());
            final int calls = 3;
            for (int call = 0; call < calls; call++)
            {
                final Tensor[] tensors = inputs(type, world, elements, call);
                job.call(tensors);
                assertRankOrderSum(tensors, call);
            }
            for (int t = 0; t < trees; t++)
            {
                // Tree t carries the messages t, t + T, ...: its appliance completes exactly their positions.
                final long share = total > t ? (total - t + trees - 1) / trees : 0;
                final DataplaneAgent appliance = job.appliances[t];
                assertThat(appliance.counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED))
                    .as("tree %d's appliance", t).isEqualTo(calls * share * MSG_LEN);
                assertThat(appliance.counters().get(DataplaneCounter.FOREIGN_TAG_ON_RING_EDGE) +
                    appliance.counters().get(DataplaneCounter.PASS_THROUGH_UNKNOWN_RING)).as("tree %d: other trees' frames", t)
                    .isZero();
                for (int r = 0; r < world; r++)
                {
                    assertThat(job.ops[r].tree(t).messagesPosted()).isEqualTo(calls * share);
                }
            }
            if (drop > 0)
            {
                long retransmitted = 0;
                for (int r = 0; r < world; r++)
                {
                    for (int t = 0; t < trees; t++)
                    {
                        retransmitted += job.ops[r].tree(t).link().sendQp().counters().retransmittedPackets();
                    }
                }
                assertThat(retransmitted).as("the injected loss was recovered by retransmission").isPositive();
            }
            assertThat(job.fabric.redirectedBySourcePort).isPositive();
        }
    }

    @Test
    void shouldCutOnlyTheMarkedTreesWindow()
    {
        final int world = 4;
        final int window = 8;
        try (Trees job = new Trees(world, 2, window, ElementType.FP32, 0, CongestionControl.DEFAULT))
        {
            // Tree 1's path is congested: the switch marks CE on its WRITEs (by the tree's source port), not tree 0's.
            final int tree1 = MultiTreeAllReduce.udpSourcePort(1);
            job.fabric.marker((inPort, frame) -> UdpHeader.srcPort(frame.buffer(), frame.udpOffset()) == tree1 &&
                frame.opcode() >= Opcode.RDMA_WRITE_FIRST && frame.opcode() <= Opcode.RDMA_WRITE_ONLY_WITH_IMMEDIATE);
            final int elements = (int)(80.5 * job.configs[0].dataBytesPerMessage()) / Float.BYTES;
            for (int call = 0; call < 2; call++)
            {
                final Tensor[] tensors = inputs(ElementType.FP32, world, elements, call);
                job.call(tensors);
                assertRankOrderSum(tensors, call);
            }
            for (int r = 0; r < world; r++)
            {
                final CongestionWindow marked = job.ops[r].tree(1).congestion();
                final CongestionWindow clean = job.ops[r].tree(0).congestion();
                assertThat(marked.markedResults()).as("rank %d tree 1: %s", r, marked).isPositive();
                assertThat(marked.minWindow()).as("rank %d tree 1", r).isLessThan(window);
                assertThat(clean.markedResults()).as("rank %d tree 0: %s", r, clean).isZero();
                assertThat(clean.minWindow()).as("rank %d tree 0", r).isEqualTo(window);
            }
        }
    }

    @Test
    void shouldRefuseTreesThatCutTheTensorDifferentlyOrShareARing()
    {
        try (Trees job = new Trees(2, 2, 4, ElementType.FP32, 0, CongestionControl.DEFAULT))
        {
            final NetReduceAllReduce tree0 = job.ops[0].tree(0);
            assertThatThrownBy(() -> new MultiTreeAllReduce(tree0, tree0))
                .hasMessageContaining("both ring " + FIRST_RING);
            assertThatThrownBy(() -> new MultiTreeAllReduce(tree0))
                .hasMessageContaining("2..16 trees");
            assertThatThrownBy(() -> new MultiTreeAllReduce(tree0, job.ops[1].tree(1)))
                .hasMessageContaining("not the same rank");
        }
        assertThatThrownBy(() -> MultiTreeAllReduce.udpSourcePort(16)).isInstanceOf(IllegalArgumentException.class);
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
