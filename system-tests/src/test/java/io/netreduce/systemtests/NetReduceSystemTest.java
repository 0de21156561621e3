package io.netreduce.systemtests;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.host.allreduce.AllReduce;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.NetReduceConfig;
import io.netreduce.host.allreduce.Tensor;
import io.netreduce.host.rc.RcConfig;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * NetReduce all-reduce end to end on the namespace test bed: W workers in their namespaces, the switch's tc
 * redirect, the daemon's dataplane on the appliance namespace's port; every rank's result must be the appliance's
 * exact rank-order sum, bit for bit, on every call.
 * <p>
 * <b>Cases.</b> The factors are W ∈ {2, 4, 8}, element type ∈ {fp32, fp16}, PMTU (= payload size) ∈ {1024,
 * 4096}, window N ∈ {1, 8}, and loss ∈ {none, 1 % at the appliance (dataplane.dropProbability), 1 % at the
 * endpoints (every packet each endpoint sends, requests and ACKs)}: 72 combinations. The nine cases below cover
 * every <em>pair</em> of factor values at least once (a pairwise covering array: each W meets each type, PMTU,
 * window and loss mode; each loss mode meets each type, PMTU and window; and so on), which is where interaction
 * bugs between two settings show up, at an eighth of the cost; each case runs in a few seconds. The full cross
 * product over in-memory ports runs in the host module's NetReduceApplianceTest; here the point is the real
 * path: AF_PACKET, veth, bridge, tc mirred, the daemon.
 * <p>
 * Each case starts its own appliance (the loss setting is an appliance-section key, which needs a restart, and
 * fresh counters make the assertions exact), makes three calls of 40.5 messages each (later calls continue the
 * MsgID sequence, the window wraps the aggregator slots, the last message is padded).
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class NetReduceSystemTest
{
    private static final int RING = 5;
    private static final int MSG_LEN = 4;
    private static final int CALLS = 3;
    private static TestBed bed;

    @BeforeAll
    static void up()
    {
        Assumptions.assumeTrue(TestBed.isRoot(), "system tests need root (network namespaces)");
        bed = TestBed.up('n', 8, 9000, false);
    }

    @AfterAll
    static void down()
    {
        if (bed != null)
        {
            bed.close();
        }
    }

    @ParameterizedTest(name = "W={0} {1} pmtu={2} window={3} loss={4}")
    @CsvSource({
        "2, fp32, 1024, 1, none",
        "2, fp16, 4096, 8, appliance",
        "2, fp32, 1024, 8, endpoints",
        "4, fp32, 4096, 8, endpoints",
        "4, fp16, 1024, 1, appliance",
        "4, fp16, 4096, 8, none",
        "8, fp32, 1024, 8, appliance",
        "8, fp16, 4096, 1, endpoints",
        "8, fp32, 4096, 1, none",
    })
    void shouldGiveEveryRankTheExactSumThroughTheAppliance(
        final int world, final String typeName, final int pmtu, final int window, final String loss)
    {
        final ElementType type = ElementType.parse(typeName);
        final double applianceDrop = loss.equals("appliance") ? 0.01 : 0.0;
        final double endpointDrop = loss.equals("endpoints") ? 0.01 : 0.0;
        final NetReduceConfig config = new NetReduceConfig(RING, window, MSG_LEN, pmtu, TimeUnit.SECONDS.toNanos(10));
        final int elements = (int)(40.5 * config.dataBytesPerMessage()) / type.size();
        try (Appliance appliance = Appliance.start(bed, applianceDrop,
                Appliance.ringJob("sys", RING, typeName, world, window, MSG_LEN, pmtu));
            WorkerRing ring = new WorkerRing(bed, world, r -> new RcConfig()
                .pmtu(pmtu)
                .retransmitTimeoutNs(TimeUnit.MILLISECONDS.toNanos(50))
                .sendDropProbability(endpointDrop)
                .faultSeed(1000L * world + r), config.regionBytes(), config.regionBytes()))
        {
            final AllReduce[] ops = new AllReduce[world];
            for (int r = 0; r < world; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.link(r), config);
            }
            for (int call = 0; call < CALLS; call++)
            {
                final Tensor[] tensors = ring.inputs(type, elements, call);
                final WorkerRing.Outcome outcome = ring.allReduce(ops, tensors, () -> 0, TimeUnit.SECONDS.toNanos(60));
                assertThat(outcome.allSucceeded()).as("call %d failed:%s", call, outcome.describe()).isTrue();
                assertThat(ring.checkRankOrderSum(tensors, call)).as("call %d", call).isNull();
            }

            final long messages = (long)CALLS * ((NetReduceAllReduce)ops[0]).messagesFor(elements * type.size());
            assertThat(appliance.counter(DataplaneCounter.AGGREGATIONS_COMPLETED)).isEqualTo(messages * MSG_LEN);
            assertThat(appliance.counter(DataplaneCounter.DROP_SPOOFED)).isZero();
            if (applianceDrop > 0)
            {
                assertThat(appliance.counter(DataplaneCounter.DROP_INJECTED)).as("frames dropped by the appliance").isPositive();
            }
            if (endpointDrop > 0)
            {
                assertThat(ring.endpointDrops()).as("packets dropped at the endpoints").isPositive();
            }
        }
    }
}
