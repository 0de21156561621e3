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
 * Parallel NetReduce (paper §3.4) through the real appliance on memory ports: H hosts, each one software RC endpoint
 * (one IP, one MAC) with n local workers; local worker i of every host is that host's rank in ring i, so every
 * ring has the same member IPs and the appliance tells the rings apart by QPN and RingID. Every local worker of
 * every host must end with {@link Arithmetic#hierarchicalSum} over the H·n global ranks, one "rack" per host.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ParallelAllReduceTest
{
    private static final long SEED = 77;
    private static final int FIRST_RING = 10;

    @ParameterizedTest(name = "hosts={0} local={1} {2} window={3} drop={4}")
    @CsvSource({
        "2, 2, fp32, 8, 0",
        "2, 2, fp16, 8, 0.01",
        "2, 4, fp32, 4, 0.01",
        "3, 3, fp16, 8, 0",
        "3, 3, fp32, 1, 0",
        "4, 2, bf16, 8, 0.01",
        "2, 3, int32, 8, 0",
    })
    void shouldGiveEveryLocalWorkerTheHierarchicalSum(
        final int hosts, final int n, final String typeName, final int window, final double drop)
    {
        final ElementType type = ElementType.parse(typeName);
        final int payload = 1024;
        final int msgLen = 4;
        final CachedNanoClock clock = new CachedNanoClock();
        clock.update(1_000_000_000L);
        final TestSwitch fabric = new TestSwitch();
        final RcEndpoint[] endpoints = new RcEndpoint[hosts];
        final NetReduceConfig[] configs = new NetReduceConfig[n];
        final RingLink[][] links = new RingLink[n][hosts];
        try
        {
            for (int h = 0; h < hosts; h++)
            {
                final MemoryPort port = new MemoryPort("h" + h, MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096, 1 << 23);
                fabric.attach(port, RingHarness.mac(h));
                endpoints[h] = new RcEndpoint(port, new RcConfig().pmtu(payload).sendDropProbability(drop)
                    .faultSeed(SEED * 31 + h), clock, RingHarness.ip(h), RingHarness.mac(h));
            }
            for (int i = 0; i < n; i++)
            {
                configs[i] = new NetReduceConfig(FIRST_RING + i, window, msgLen, payload, 2_000_000_000L);
                for (int h = 0; h < hosts; h++)
                {
                    links[i][h] = new RingLink(endpoints[h], clock, h, hosts, configs[i].regionBytes(),
                        configs[i].regionBytes());
                }
                for (int h = 0; h < hosts; h++)
                {
                    links[i][h].connect(links[i][(h + 1) % hosts].receiveInfo(),
                        links[i][(h + hosts - 1) % hosts].sendInfo());
                }
            }
            final MemoryPort appliancePort = new MemoryPort("appliance", MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096,
                1 << 23);
            final DataplaneAgent appliance = new DataplaneAgent(new DataplaneContext()
                .ports(new ArrayList<PacketPort>(List.of(appliancePort)))
                .memoryBudget(64L << 20));
            fabric.redirectRoceTo(fabric.attach(appliancePort, 0));
            for (int i = 0; i < n; i++)
            {
                final List<RingMember> members = new ArrayList<>();
                for (int h = 0; h < hosts; h++)
                {
                    members.add(new RingMember(h, RingHarness.ip(h), links[i][h].receiveQp().qpn(),
                        RingHarness.mac(h)));
                }
                await(appliance, appliance.proxy().installRing(new RingDefinition(FIRST_RING + i, "ring" + i, type,
                    window, msgLen, payload, members)));
            }

            final ParallelAllReduce[] parallel = new ParallelAllReduce[hosts];
            for (int h = 0; h < hosts; h++)
            {
                final AllReduce[] rings = new AllReduce[n];
                for (int i = 0; i < n; i++)
                {
                    rings[i] = new NetReduceAllReduce(links[i][h], configs[i]);
                }
                parallel[h] = new ParallelAllReduce(rings);
            }
            // 40.5 messages of one ring per local worker: the last message of each ring padded, parts of
            // unequal length when the element count is not a multiple of n.
            final int elements = (int)(n * 40.5 * configs[0].dataBytesPerMessage()) / type.size() + 1;
            final int world = hosts * n;
            final int[] hostFirst = new int[hosts];
            for (int h = 0; h < hosts; h++)
            {
                hostFirst[h] = h * n;
            }
            for (int iteration = 0; iteration < 3; iteration++)
            {
                final Tensor[][] tensors = new Tensor[hosts][n];
                for (int h = 0; h < hosts; h++)
                {
                    for (int j = 0; j < n; j++)
                    {
                        tensors[h][j] = new Tensor(type,
                            new UnsafeBuffer(ByteBuffer.allocateDirect(elements * type.size())), 0, elements);
                        TensorPattern.fill(tensors[h][j], SEED, h * n + j, iteration);
                    }
                    parallel[h].begin(tensors[h]);
                }
                for (int step = 0; ; step++)
                {
                    boolean done = true;
                    for (final ParallelAllReduce each : parallel)
                    {
                        done &= each.isDone();
                    }
                    if (done)
                    {
                        break;
                    }
                    assertThat(step).as("steps").isLessThan(3_000_000);
                    clock.advance(5_000);
                    for (final RcEndpoint endpoint : endpoints)
                    {
                        endpoint.doWork();
                    }
                    fabric.doWork();
                    appliance.doWork();
                    fabric.doWork();
                    for (final ParallelAllReduce each : parallel)
                    {
                        each.poll();
                    }
                }
                final int it = iteration;
                final Arithmetic.Inputs inputs = (rank, index) -> TensorPattern.bits(type, SEED, rank, it, index);
                for (int e = 0; e < elements; e++)
                {
                    final int expected = Arithmetic.hierarchicalSum(type, world, hostFirst, inputs, e);
                    for (int h = 0; h < hosts; h++)
                    {
                        for (int j = 0; j < n; j++)
                        {
                            final int actual = Arithmetic.get(tensors[h][j], e);
                            if (actual != expected)
                            {
                                throw new AssertionError("host " + h + " local worker " + j + " iteration " +
                                    iteration + " element " + e + ": expected 0x" + Integer.toHexString(expected) +
                                    " got 0x" + Integer.toHexString(actual));
                            }
                        }
                    }
                }
            }
            long positions = 0;
            for (int i = 0; i < n; i++)
            {
                final int partBytes = (ParallelAllReduce.partStart(elements, n, i + 1) -
                    ParallelAllReduce.partStart(elements, n, i)) * type.size();
                positions += 3L * ((NetReduceAllReduce)parallel[0].ring(i)).messagesFor(partBytes) * msgLen;
            }
            assertThat(appliance.counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED)).isEqualTo(positions);
            assertThat(appliance.counters().get(DataplaneCounter.DROP_SPOOFED)).isZero();
        }
        finally
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

    @Test
    void shouldSplitIntoContiguousPartsCoveringTheTensor()
    {
        assertThat(ParallelAllReduce.partStart(10, 4, 0)).isZero();
        assertThat(ParallelAllReduce.partStart(10, 4, 1)).isEqualTo(2);
        assertThat(ParallelAllReduce.partStart(10, 4, 2)).isEqualTo(5);
        assertThat(ParallelAllReduce.partStart(10, 4, 3)).isEqualTo(7);
        assertThat(ParallelAllReduce.partStart(10, 4, 4)).isEqualTo(10);
        assertThat(ParallelAllReduce.partStart(Integer.MAX_VALUE, 3, 3)).isEqualTo(Integer.MAX_VALUE);
    }

    @Test
    void shouldRefuseTensorsThatDoNotMatchTheLocalWorkers()
    {
        final RcEndpoint endpoint = new RcEndpoint(new MemoryPort("x"), new RcConfig(), new CachedNanoClock(),
            RingHarness.ip(0), RingHarness.mac(0));
        try
        {
            final NetReduceConfig config = new NetReduceConfig(1, 2, 1, 1024, 1_000_000_000L);
            final AllReduce[] rings = new AllReduce[2];
            for (int i = 0; i < 2; i++)
            {
                final RingLink a = new RingLink(endpoint, new CachedNanoClock(), 0, 2, config.regionBytes(),
                    config.regionBytes());
                final RingLink b = new RingLink(endpoint, new CachedNanoClock(), 1, 2, config.regionBytes(),
                    config.regionBytes());
                a.connect(b.receiveInfo(), b.sendInfo());
                b.connect(a.receiveInfo(), a.sendInfo());
                rings[i] = new NetReduceAllReduce(a, config);
            }
            final ParallelAllReduce parallel = new ParallelAllReduce(rings);
            final Tensor one = new Tensor(ElementType.FP32, new UnsafeBuffer(ByteBuffer.allocateDirect(64)), 0, 16);
            assertThatThrownBy(() -> parallel.begin(one)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("1 tensors for 2 local workers");
            final Tensor half = new Tensor(ElementType.FP16, new UnsafeBuffer(ByteBuffer.allocateDirect(64)), 0, 16);
            assertThatThrownBy(() -> parallel.begin(one, half)).isInstanceOf(IllegalArgumentException.class);
            assertThat(parallel.isDone()).isTrue();
        }
        finally
        {
            endpoint.close();
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
