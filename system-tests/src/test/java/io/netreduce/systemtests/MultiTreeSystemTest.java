package io.netreduce.systemtests;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.host.allreduce.MultiTreeAllReduce;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.NetReduceConfig;
import io.netreduce.host.allreduce.Tensor;
import io.netreduce.host.allreduce.RingLink;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.protocol.element.ElementType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Several aggregation trees per job (PANAMA §4.1) on the bed: {@code testbed.sh --trees 2} puts two appliances on
 * the switch, which steers each tree's RoCE to its appliance by the tree's UDP source port; two in-JVM daemons
 * ({@code tree-a}, {@code tree-b}) read one {@code jobs:} section whose rings name them; the W ranks spread each
 * call's messages round robin over the two rings ({@link MultiTreeAllReduce}). Every call is exact on every rank,
 * each appliance completes exactly its tree's positions and sees nothing of the other tree, and the two appliance
 * ports carry balanced bytes.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class MultiTreeSystemTest
{
    private static final int FIRST_RING = 30;
    private static final int WORLD = 4;
    private static final int TREES = 2;
    private static final int WINDOW = 8;
    private static final int MSG_LEN = 16;
    private static final int PMTU = 4096;
    private static final int CALLS = 3;
    /** Messages per call: an even count, so each tree carries the same share. */
    private static final int MESSAGES = 120;

    private static TestBed bed;

    @BeforeAll
    static void up()
    {
        Assumptions.assumeTrue(TestBed.isRoot(), "system tests need root (network namespaces)");
        bed = TestBed.upTrees('m', WORLD, 9000, TREES);
    }

    @AfterAll
    static void down()
    {
        if (bed != null)
        {
            bed.close();
        }
    }

    @Test
    void shouldSpreadEveryCallOverTwoTreesEachAggregatedByItsOwnApplianceWithEverySumExact()
    {
        final ElementType type = ElementType.FP32;
        final String jobs = Appliance.treesJob("trees", FIRST_RING, "fp32", WORLD, TREES, WINDOW, MSG_LEN, PMTU);
        final NetReduceConfig[] configs = new NetReduceConfig[TREES];
        for (int t = 0; t < TREES; t++)
        {
            configs[t] = new NetReduceConfig(FIRST_RING + t, WINDOW, MSG_LEN, PMTU, TimeUnit.SECONDS.toNanos(10));
        }
        final int elements = MESSAGES * configs[0].dataBytesPerMessage() / type.size();
        final Appliance[] appliances = new Appliance[TREES];
        try (WorkerRing ring = new WorkerRing(bed, WORLD, r -> new RcConfig()
            .pmtu(PMTU)
            .retransmitTimeoutNs(TimeUnit.MILLISECONDS.toNanos(50)), configs[0].regionBytes(), configs[0].regionBytes()))
        {
            for (int t = 0; t < TREES; t++)
            {
                appliances[t] = Appliance.start(bed.treeApplianceNamespace(t), bed.mtu(), Appliance.treeName(t), 0.0,
                    jobs);
            }
            final RingLink[][] links = new RingLink[TREES][];
            for (int t = 0; t < TREES; t++)
            {
                links[t] = ring.addRing(MultiTreeAllReduce.udpSourcePort(t), configs[t].regionBytes(),
                    configs[t].regionBytes());
            }
            final MultiTreeAllReduce[] ops = new MultiTreeAllReduce[WORLD];
            for (int r = 0; r < WORLD; r++)
            {
                final NetReduceAllReduce[] trees = new NetReduceAllReduce[TREES];
                for (int t = 0; t < TREES; t++)
                {
                    trees[t] = new NetReduceAllReduce(links[t][r], configs[t]);
                }
                ops[r] = new MultiTreeAllReduce(trees);
            }
            final long[] rxBefore = new long[TREES];
            for (int t = 0; t < TREES; t++)
            {
                rxBefore[t] = appliances[t].counters().get("port eth0 rx_bytes");
            }
            for (int call = 0; call < CALLS; call++)
            {
                final Tensor[] tensors = ring.inputs(type, elements, call);
                final WorkerRing.Outcome outcome = ring.allReduce(ops, tensors, () -> 0, TimeUnit.SECONDS.toNanos(60));
                assertThat(outcome.allSucceeded()).as("call %d failed:%s", call, outcome.describe()).isTrue();
                assertThat(ring.checkRankOrderSum(tensors, call)).as("call %d", call).isNull();
            }
            final long[] rx = new long[TREES];
            for (int t = 0; t < TREES; t++)
            {
                final Appliance appliance = appliances[t];
                // Tree t carries messages t, t + 2, ...: half of each call, every position summed by its appliance.
                assertThat(appliance.counter(DataplaneCounter.AGGREGATIONS_COMPLETED)).as("%s", Appliance.treeName(t))
                    .isEqualTo((long)CALLS * (MESSAGES / TREES) * MSG_LEN);
                assertThat(appliance.counter(DataplaneCounter.PASS_THROUGH_UNKNOWN_RING) +
                    appliance.counter(DataplaneCounter.FOREIGN_TAG_ON_RING_EDGE))
                    .as("%s saw another tree's first packets", Appliance.treeName(t)).isZero();
                rx[t] = appliance.counters().get("port eth0 rx_bytes") - rxBefore[t];
                for (int r = 0; r < WORLD; r++)
                {
                    assertThat(ops[r].tree(t).messagesPosted()).isEqualTo((long)CALLS * MESSAGES / TREES);
                }
            }
            // The trees' paths carry balanced bytes (each appliance port: its tree's requests and ACKs).
            assertThat((double)rx[1] / rx[0]).as("bytes into tree-b / tree-a: %d / %d", rx[1], rx[0])
                .isBetween(0.9, 1.1);
            assertThat(rx[0]).isGreaterThan((long)CALLS * MESSAGES / TREES * MSG_LEN * PMTU * WORLD);
        }
        finally
        {
            for (final Appliance appliance : appliances)
            {
                if (appliance != null)
                {
                    appliance.close();
                }
            }
        }
    }
}
