package io.netreduce.systemtests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netreduce.controlplane.api.ApiClient;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.host.allreduce.AllReduce;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.NetReduceConfig;
import io.netreduce.host.allreduce.Tensor;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.protocol.element.ElementType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The daemon with two dataplane lanes on the namespace test bed: two jobs' rings (workers 0-1 and 2-3) all-reduce at
 * the same time; each ring is placed on its own lane, the kernel's fanout classifier hands each ring's frames to that
 * lane only (a frame of a ring on the other lane would be passed through as an unknown ring, or dropped as an
 * unknown connection), and every rank of both rings gets the exact rank-order sum on every call.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class LanesSystemTest
{
    static final int MSG_LEN = 4;
    static final int PAYLOAD = 4096;
    static final int WINDOW = 8;
    private static final int CALLS = 3;
    private static final ObjectMapper JSON = new ObjectMapper();
    private static TestBed bed;

    @BeforeAll
    static void up()
    {
        Assumptions.assumeTrue(TestBed.isRoot(), "system tests need root (network namespaces)");
        bed = TestBed.up('l', 4, 9000, false);
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
    void shouldAggregateTwoJobsAtOnceEachOnItsOwnLane() throws Exception
    {
        final String jobs = "jobs:\n" + job("job-a", 1, 0) + job("job-b", 2, 2);
        final ExecutorService threads = Executors.newFixedThreadPool(2);
        try (Appliance appliance = Appliance.start(bed.applianceNamespace(), bed.mtu(), null, 0.0, jobs, 2))
        {
            final List<Future<Long>> runs = new ArrayList<>();
            for (final int first : new int[]{ 0, 2 })
            {
                runs.add(threads.submit(run(first)));
            }
            long aggregations = 0;
            for (final Future<Long> run : runs)
            {
                aggregations += run.get(200, TimeUnit.SECONDS);
            }

            final Map<Integer, Integer> laneOf = lanes(appliance);
            assertThat(laneOf).as("each ring on its own lane").containsOnlyKeys(1, 2);
            assertThat(laneOf.values()).containsExactlyInAnyOrder(0, 1);

            assertThat(appliance.counter(DataplaneCounter.AGGREGATIONS_COMPLETED)).isEqualTo(aggregations);
            final Map<String, Long> counters = appliance.counters();
            assertThat(counters.get("port eth0 lane 0 rx_frames")).as("frames the kernel gave lane 0").isPositive();
            assertThat(counters.get("port eth0 lane 1 rx_frames")).as("frames the kernel gave lane 1").isPositive();
            assertThat(appliance.counter(DataplaneCounter.PASS_THROUGH_UNKNOWN_RING))
                .as("first packets that reached a lane without their ring").isZero();
            for (final DataplaneCounter counter : DataplaneCounter.values())
            {
                if (counter.isDrop())
                {
                    assertThat(appliance.counter(counter)).as(counter.label()).isZero();
                }
            }
        }
        finally
        {
            threads.shutdownNow();
        }
    }

    @Test
    void shouldSteerARingAddedThroughTheApiToTheLaneLeftFreeByARemovedOne() throws Exception
    {
        final String jobs = "jobs:\n" + job("job-a", 1, 0) + job("job-b", 2, 2);
        try (Appliance appliance = Appliance.start(bed.applianceNamespace(), bed.mtu(), null, 0.0, jobs, 2))
        {
            final Map<Integer, Integer> before = lanes(appliance);
            assertThat(appliance.request("DELETE", "/v1/jobs/job-a", null, null).status()).isEqualTo(200);
            // A new job on the removed job's hosts, under another ring id: the emptied lane takes it, and the
            // kernel must now steer those hosts' frames there for ring 3.
            // The jobs-list item as a mapping of its own: each line less its list indentation.
            final String added = job("job-c", 3, 0).lines().map(line -> line.substring(Math.min(4, line.length())))
                .collect(java.util.stream.Collectors.joining("\n", "", "\n"));
            final ApiClient.Response response = appliance.request("POST", "/v1/jobs", added, "application/yaml");
            assertThat(response.status()).as(response.body()).isEqualTo(201);

            final Map<Integer, Integer> after = lanes(appliance);
            assertThat(after).containsOnlyKeys(2, 3);
            assertThat(after.get(3)).isEqualTo(before.get(1));
            assertThat(after.get(2)).isEqualTo(before.get(2));

            final long aggregations = run(0, 3).call();
            assertThat(appliance.counter(DataplaneCounter.AGGREGATIONS_COMPLETED)).isEqualTo(aggregations);
            assertThat(appliance.counter(DataplaneCounter.PASS_THROUGH_UNKNOWN_RING)).isZero();
        }
    }

    private static Map<Integer, Integer> lanes(final Appliance appliance) throws Exception
    {
        final JsonNode rings = JSON.readTree(appliance.request("GET", "/v1/rings", null, null).body());
        final Map<Integer, Integer> laneOf = new java.util.TreeMap<>();
        rings.forEach(status -> laneOf.put(status.path("ring").path("id").asInt(), status.path("lane").asInt()));
        return laneOf;
    }

    private static Callable<Long> run(final int first)
    {
        return run(first, first / 2 + 1);
    }

    /**
     * A 2-rank ring of bed workers {@code first} and {@code first + 1}: CALLS exact all-reduces.
     *
     * @return the aggregations the appliance must have completed for it.
     */
    private static Callable<Long> run(final int first, final int ringId)
    {
        return () ->
        {
            final int world = 2;
            final NetReduceConfig config =
                new NetReduceConfig(ringId, WINDOW, MSG_LEN, PAYLOAD, TimeUnit.SECONDS.toNanos(10));
            try (WorkerRing ring = new WorkerRing(bed, first, world, r -> new RcConfig()
                .pmtu(PAYLOAD)
                // No loss is injected here, and the test asserts that nothing is dropped: a 50 ms timer (the other
                // system tests', which inject loss) fired on a loaded 2-core CI machine with two rings at once and
                // resent messages already summed, which the appliance then counted as stale (seen once in CI).
                .retransmitTimeoutNs(TimeUnit.SECONDS.toNanos(1))
                .faultSeed(first * 10L + r), config.regionBytes(), config.regionBytes()))
            {
                return exactCalls(ring, world, config, "ring of workers " + first + "-" + (first + 1));
            }
        };
    }

    /**
     * CALLS all-reduces of 40.5 messages' worth of fp32 on {@code ring}, each asserted to succeed with the exact
     * rank-order sum on every rank.
     *
     * @return the aggregations the appliance must have completed for them.
     */
    static long exactCalls(final WorkerRing ring, final int world, final NetReduceConfig config, final String name)
    {
        final int elements = (int)(40.5 * config.dataBytesPerMessage()) / ElementType.FP32.size();
        final AllReduce[] ops = new AllReduce[world];
        for (int r = 0; r < world; r++)
        {
            ops[r] = new NetReduceAllReduce(ring.link(r), config);
        }
        for (int call = 0; call < CALLS; call++)
        {
            final Tensor[] tensors = ring.inputs(ElementType.FP32, elements, call);
            final WorkerRing.Outcome outcome = ring.allReduce(ops, tensors, () -> 0, TimeUnit.SECONDS.toNanos(60));
            assertThat(outcome.allSucceeded()).as("%s call %d failed:%s", name, call, outcome.describe()).isTrue();
            assertThat(ring.checkRankOrderSum(tensors, call)).as("%s call %d", name, call).isNull();
        }
        return (long)CALLS * ((NetReduceAllReduce)ops[0]).messagesFor(elements * 4) * MSG_LEN;
    }

    /**
     * @return a jobs-list item: one fp32 ring of bed workers {@code first} and {@code first + 1} (window 8, MsgLen 4,
     *         4 KiB payloads), for a daemon's configuration.
     */
    static String job(final String name, final int ringId, final int first)
    {
        return """
              - name: %s
                rings:
                  - id: %d
                    elementType: fp32
                    window: %d
                    msgLen: %d
                    payloadSize: %d
                    pmtu: %d
                    members:
                      - { rank: 0, ip: %s }
                      - { rank: 1, ip: %s }
            """.formatted(name, ringId, WINDOW, MSG_LEN, PAYLOAD, PAYLOAD,
            TestBed.workerIp(first).getHostAddress(), TestBed.workerIp(first + 1).getHostAddress());
    }
}
