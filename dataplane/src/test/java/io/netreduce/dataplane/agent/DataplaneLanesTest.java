package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.capture.CaptureTap;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.RingCounter;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.RingSimulation;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.LaneSteeringProgram;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.PacketPort;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Two lanes over memory ports: rings placed on lanes, their edges steered there, each ring aggregated by its own
 * lane's agent only; the proxy's merged views and the budget over all lanes.
 */
class DataplaneLanesTest
{
    private final List<MemoryPort> ports = new ArrayList<>();
    private final List<List<LaneSteeringProgram.Route>> steered = new ArrayList<>();
    private DataplaneLanes lanes;

    @AfterEach
    void close()
    {
        if (lanes != null)
        {
            lanes.agents().forEach(DataplaneAgent::onClose);
        }
    }

    @Test
    void shouldPlaceRingsOnTheLeastLoadedLaneAndSteerTheirEdgesThere()
    {
        start(2, 1L << 30, steered::add);
        final RingDefinition a = ring(1, 0, 3);
        final RingDefinition b = ring(2, 10, 3);

        assertThat(install(a).lane()).isZero();
        assertThat(install(b).lane()).isEqualTo(1);

        assertThat(lanes.proxy().laneOf(1)).isZero();
        assertThat(lanes.proxy().laneOf(2)).isEqualTo(1);
        assertThat(steered.getLast()).containsExactlyInAnyOrder(
            route(0, 1, 0), route(1, 2, 0), route(2, 0, 0),
            route(10, 11, 1), route(11, 12, 1), route(12, 10, 1));
        assertThat(lanes.agent(0).tables().ring(1)).isNotNull();
        assertThat(lanes.agent(0).tables().ring(2)).isNull();
        assertThat(lanes.agent(1).tables().ring(2)).isNotNull();
    }

    @Test
    void shouldAggregateEachRingExactlyOnItsOwnLane()
    {
        start(2, 1L << 30, steered::add);
        final RingDefinition a = ring(1, 0, 4);
        final RingDefinition b = ring(2, 10, 3);
        install(a);
        install(b);

        final int messages = 2 * a.window() + 1;
        final RingSimulation onLane0 = RingSimulation.lossless(
            DataplaneHarness.lane(lanes.agent(0), ports.get(0), lanes.proxy()), a, messages, 5).run();
        final RingSimulation onLane1 = RingSimulation.lossless(
            DataplaneHarness.lane(lanes.agent(1), ports.get(1), lanes.proxy()), b, messages, 6).run();

        for (int m = 0; m < messages; m++)
        {
            for (int rank = 0; rank < 4; rank++)
            {
                assertThat(onLane0.deliveredMessage(rank, m)).isEqualTo(onLane0.expectedMessage(rank, m));
            }
            for (int rank = 0; rank < 3; rank++)
            {
                assertThat(onLane1.deliveredMessage(rank, m)).isEqualTo(onLane1.expectedMessage(rank, m));
            }
        }
        final long perRing = (long)messages * a.msgLen();
        assertThat(lanes.agent(0).counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED)).isEqualTo(perRing);
        assertThat(lanes.agent(1).counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED)).isEqualTo(perRing);
        assertThat(lanes.proxy().counter(DataplaneCounter.AGGREGATIONS_COMPLETED)).isEqualTo(2 * perRing);
        assertThat(lanes.proxy().counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED.label())).isEqualTo(2 * perRing);
        assertThat(ringCounter(1, RingCounter.AGGREGATIONS_COMPLETED)).isEqualTo(perRing);
        assertThat(ringCounter(2, RingCounter.AGGREGATIONS_COMPLETED)).isEqualTo(perRing);

        final List<ConnectionEntry> clt = await(lanes.proxy().connections());
        assertThat(clt).extracting(ConnectionEntry::ringId).containsOnly(1, 2);
        assertThat(clt).hasSize(4 + 3);
        assertThat(await(lanes.proxy().rings())).extracting(RingInstalled::ringId, RingInstalled::lane)
            .containsExactly(org.assertj.core.groups.Tuple.tuple(1, 0), org.assertj.core.groups.Tuple.tuple(2, 1));
    }

    @Test
    void shouldPutARingThatSharesAWorkerPairOnThatPairsLane()
    {
        start(2, 1L << 30, steered::add);
        install(ring(1, 0, 3));
        install(ring(2, 10, 3));
        // Another job on hosts 11 and 12 (the second ring's edge 11 -> 12).
        assertThat(install(ring(3, 11, 2)).lane()).isEqualTo(1);
    }

    @Test
    void shouldRefuseARingSharingWorkerPairsWithRingsOnTwoLanes()
    {
        start(2, 1L << 30, steered::add);
        install(ring(1, 0, 2));
        install(ring(2, 10, 2));
        final RingDefinition both = ring(3, List.of(0, 1, 10, 11));
        // Edges 0 -> 1 (lane 0) and 10 -> 11 (lane 1).

        assertThatThrownBy(() -> install(both)).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("ring 3 shares worker pairs with rings on lanes [0, 1]");
        assertThat(lanes.proxy().laneOf(3)).isEqualTo(-1);
        assertThat(steered.getLast()).hasSize(4);
    }

    @Test
    void shouldCheckTheMemoryBudgetOverEveryLane()
    {
        final RingDefinition a = ring(1, 0, 3);
        final long one = DataplaneTables.memoryFor(a);
        start(2, one + one / 2, steered::add);
        install(a);

        assertThatThrownBy(() -> install(ring(2, 10, 3))).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("does not fit the aggregator memory budget");
        assertThat(lanes.agent(1).tables().ring(2)).isNull();
        assertThat(await(lanes.proxy().rings()).getFirst().budgetUsedBytes()).isEqualTo(one);
    }

    @Test
    void shouldSteerARemovedRingsEdgesAwayAndFreeItsPlace()
    {
        start(2, 1L << 30, steered::add);
        install(ring(1, 0, 2));
        install(ring(2, 10, 2));

        await(lanes.proxy().removeRing(1));

        assertThat(steered.getLast()).containsExactlyInAnyOrder(route(10, 11, 1), route(11, 10, 1));
        assertThat(lanes.proxy().laneOf(1)).isEqualTo(-1);
        assertThat(install(ring(3, 20, 2)).lane()).as("the emptied lane takes the next ring").isZero();
    }

    @Test
    void shouldRefuseAnInstallTheKernelCannotSteerAndStayUsable()
    {
        final boolean[] refuse = { true };
        start(2, 1L << 30, routes ->
        {
            if (refuse[0])
            {
                throw new IllegalArgumentException("steering program too long");
            }
        });

        assertThatThrownBy(() -> install(ring(1, 0, 2))).hasMessageContaining("steering program too long");
        assertThat(lanes.proxy().laneOf(1)).isEqualTo(-1);

        refuse[0] = false;
        assertThat(install(ring(1, 0, 2)).ringId()).isEqualTo(1);
    }

    @Test
    void shouldRefuseAnUnknownLaneAndTheSameRingTwice()
    {
        start(2, 1L << 30, steered::add);
        assertThatThrownBy(() -> await(lanes.proxy().installRing(ring(1, 0, 2), 2)))
            .hasMessageContaining("lane 2 does not exist (2 lanes)");
        install(ring(1, 0, 2));
        assertThatThrownBy(() -> install(ring(1, 10, 2))).hasMessageContaining("ring 1 is already installed");
        assertThatThrownBy(() -> await(lanes.proxy().removeRing(9))).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void shouldInstallACaptureTapOnEveryLane()
    {
        start(2, 1L << 30, steered::add);
        final CaptureTap tap = CaptureTap.forPort(1, 0, 1 << 16);
        await(lanes.proxy().startCapture(tap));
        ports.get(0).inject(new byte[64]);
        ports.get(1).inject(new byte[64]);
        runAll();
        assertThat(tap.captured()).isEqualTo(2);
        await(lanes.proxy().stopCapture(1));
        ports.get(1).inject(new byte[64]);
        runAll();
        assertThat(tap.captured()).isEqualTo(2);
    }

    private void start(final int laneCount, final long budget, final LaneSteering steering)
    {
        final List<List<PacketPort>> lanePorts = new ArrayList<>();
        for (int lane = 0; lane < laneCount; lane++)
        {
            final MemoryPort port = new MemoryPort("lane" + lane, MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096, 1 << 23);
            ports.add(port);
            lanePorts.add(List.of(port));
        }
        lanes = new DataplaneLanes(new DataplaneContext().memoryBudget(budget), lanePorts, steering);
    }

    private RingInstalled install(final RingDefinition config)
    {
        return await(lanes.proxy().installRing(config));
    }

    private <T> T await(final CompletableFuture<T> reply)
    {
        for (int i = 0; i < 100 && !reply.isDone(); i++)
        {
            runAll();
        }
        try
        {
            return reply.get(1, TimeUnit.SECONDS);
        }
        catch (final ExecutionException ex)
        {
            throw ex.getCause() instanceof RuntimeException runtime ? runtime : new IllegalStateException(ex);
        }
        catch (final Exception ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    private void runAll()
    {
        boolean worked = true;
        while (worked)
        {
            worked = false;
            for (final DataplaneAgent agent : lanes.agents())
            {
                worked |= agent.doWork() > 0;
            }
        }
        ports.forEach(MemoryPort::drainSent);
    }

    private long ringCounter(final int ringId, final RingCounter kind)
    {
        final long[] value = { -1 };
        for (final var counters : lanes.proxy().laneCounters())
        {
            counters.reader().forEach((id, type, key, label) ->
            {
                if (key.getInt(RingCounter.RING_ID_KEY_OFFSET) == ringId &&
                    key.getInt(RingCounter.KIND_KEY_OFFSET) == kind.ordinal())
                {
                    value[0] = counters.reader().getCounterValue(id);
                }
            });
        }
        return value[0];
    }

    /**
     * A ring of {@code ranks} hosts 10.0.0.(first + 1) ...
     */
    private static RingDefinition ring(final int ringId, final int first, final int ranks)
    {
        final List<Integer> hosts = new ArrayList<>();
        for (int r = 0; r < ranks; r++)
        {
            hosts.add(first + r);
        }
        return ring(ringId, hosts);
    }

    private static RingDefinition ring(final int ringId, final List<Integer> hosts)
    {
        final List<RingMember> members = new ArrayList<>();
        for (int r = 0; r < hosts.size(); r++)
        {
            members.add(new RingMember(r, host(hosts.get(r))));
        }
        return new RingDefinition(ringId, "job-" + ringId, ElementType.FP32, 2, 3, 256, members);
    }

    private static InetAddress host(final int index)
    {
        return InetAddress.ofLiteral("10.0.0." + (index + 1));
    }

    private static LaneSteeringProgram.Route route(final int from, final int to, final int lane)
    {
        return new LaneSteeringProgram.Route(host(from), host(to), lane);
    }
}
