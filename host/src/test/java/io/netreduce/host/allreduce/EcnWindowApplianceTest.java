package io.netreduce.host.allreduce;

import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.wire.Opcode;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * PANAMA's congestion control end to end through the real appliance: the in-test switch marks CE on one rank's
 * packets (its uplink congested), the appliance ORs the mark into the results of every position it touched, every
 * rank sees its results marked and cuts its window (synchronised: the same results, the same marks), results stay
 * exact, and once the marks stop the windows grow back to N. The ring's receive queue pairs send no CNP for the
 * marked results while the window adapts; with congestion control off, marks are counted, the window stays at N, and
 * DCQCN's CNPs flow as before.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class EcnWindowApplianceTest
{
    private static final long SEED = 99;
    private static final int RING = 5;
    private static final int WORLD = 4;
    private static final int WINDOW = 8;
    private static final int MSG_LEN = 4;
    private static final int PAYLOAD = 1024;

    /** Runs 3 calls; the switch marks rank 1's WRITEs during the first one only. */
    private static NetReduceAllReduce[] run(final CongestionControl control, final long[] cnps)
    {
        final NetReduceConfig config = new NetReduceConfig(RING, WINDOW, MSG_LEN, PAYLOAD, 2_000_000_000L)
            .withCongestion(control);
        final ElementType type = ElementType.FP32;
        final int elements = (int)(60.5 * config.dataBytesPerMessage()) / type.size();
        try (RingHarness ring = new RingHarness(WORLD, r -> new RcConfig().pmtu(PAYLOAD),
            config.regionBytes(), config.regionBytes()))
        {
            final DataplaneAgent appliance = NetReduceApplianceTest.applianceWithoutRings(ring);
            final List<RingMember> members = new ArrayList<>();
            for (int r = 0; r < WORLD; r++)
            {
                members.add(new RingMember(r, RingHarness.ip(r), ring.links[r].receiveQp().qpn(),
                    RingHarness.mac(r)));
            }
            NetReduceApplianceTest.await(appliance, appliance.proxy().installRing(new RingDefinition(RING, "ecn",
                type, WINDOW, MSG_LEN, PAYLOAD, members)));
            final boolean[] marking = { true };
            // Rank 1's port is switch port 1; mark its RDMA WRITEs (not its ACKs) while `marking`.
            ring.fabric.marker((inPort, frame) -> marking[0] && inPort == 1 &&
                frame.opcode() >= Opcode.RDMA_WRITE_FIRST && frame.opcode() <= Opcode.RDMA_WRITE_ONLY_WITH_IMMEDIATE);
            final NetReduceAllReduce[] ops = new NetReduceAllReduce[WORLD];
            for (int r = 0; r < WORLD; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.links[r], config);
            }
            for (int iteration = 0; iteration < 3; iteration++)
            {
                marking[0] = iteration == 0;
                final Tensor[] tensors = new Tensor[WORLD];
                for (int r = 0; r < WORLD; r++)
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
                    final int expected = Arithmetic.rankOrderSum(type, WORLD, inputs, i);
                    for (int r = 0; r < WORLD; r++)
                    {
                        assertThat(Arithmetic.get(tensors[r], i)).as("rank %d call %d element %d", r, it, i)
                            .isEqualTo(expected);
                    }
                }
                if (iteration == 0)
                {
                    for (int r = 0; r < WORLD; r++)
                    {
                        assertThat(ops[r].congestion().markedResults())
                            .as("rank %d: every result of the marked call carries the mark", r)
                            .isEqualTo(ops[r].messagesFor(elements * type.size()));
                    }
                }
            }
            assertThat(ring.fabric.marked).isPositive();
            for (int r = 0; r < WORLD; r++)
            {
                cnps[r] = ring.links[r].receiveQp().counters().cnpsSent();
            }
            return ops;
        }
    }

    @Test
    void shouldShrinkEveryRanksWindowOnMarkedResultsAndGrowItBackWithResultsExact()
    {
        final long[] cnps = new long[WORLD];
        final NetReduceAllReduce[] ops = run(CongestionControl.DEFAULT, cnps);
        for (int r = 0; r < WORLD; r++)
        {
            final CongestionWindow window = ops[r].congestion();
            assertThat(window.minWindow()).as("rank %d: %s", r, window).isEqualTo(1);
            assertThat(window.decreases()).as("rank %d", r).isEqualTo(ops[0].congestion().decreases());
            assertThat(window.window()).as("rank %d back at N after two clean calls: %s", r, window)
                .isEqualTo(WINDOW);
            assertThat(window.alpha()).isLessThan(1.0);
            assertThat(cnps[r]).as("rank %d: no CNP for marked results while the window adapts", r).isZero();
        }
    }

    @Test
    void shouldKeepTheWindowAtNAndSendCnpsWhenCongestionControlIsOff()
    {
        final long[] cnps = new long[WORLD];
        final NetReduceAllReduce[] ops = run(CongestionControl.OFF, cnps);
        long total = 0;
        for (int r = 0; r < WORLD; r++)
        {
            final CongestionWindow window = ops[r].congestion();
            assertThat(window.minWindow()).isEqualTo(WINDOW);
            assertThat(window.markedResults()).isPositive();
            total += cnps[r];
        }
        assertThat(total).as("DCQCN's notification point answers the marks as before").isPositive();
    }
}
