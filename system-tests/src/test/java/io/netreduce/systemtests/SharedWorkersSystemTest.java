package io.netreduce.systemtests;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.host.allreduce.NetReduceConfig;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Two jobs whose ranks share the same two workers' interfaces (two trainers per host, each with its own endpoint,
 * as two sidecars on one NIC): both rings through the appliance at once. Each endpoint's port takes only RoCE frames
 * to its own queue pairs (the kernel's socket filter, {@code RoceReceiveFilter.forQueuePairs}), so neither job's
 * endpoints see a frame of the other's, and every rank of both gets the exact rank-order sum.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class SharedWorkersSystemTest
{
    private static final int WORLD = 2;
    private static TestBed bed;

    @BeforeAll
    static void up()
    {
        Assumptions.assumeTrue(TestBed.isRoot(), "system tests need root (network namespaces)");
        bed = TestBed.up('q', WORLD, 9000, false);
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
    void shouldKeepEachJobsFramesOutOfTheOtherJobsEndpointsWithEverySumExact() throws Exception
    {
        // both rings of the same two workers (LanesSystemTest's ring settings)
        final String jobs = "jobs:\n" + LanesSystemTest.job("job-a", 1, 0) + LanesSystemTest.job("job-b", 2, 0);
        final ExecutorService threads = Executors.newFixedThreadPool(2);
        final List<WorkerRing> rings = new ArrayList<>();
        try (Appliance appliance = Appliance.start(bed.applianceNamespace(), bed.mtu(), null, 0.0, jobs, 1))
        {
            // Both jobs' endpoints and queue pairs exist before either sends: a frame of one reaching the other's
            // endpoint could then only be the filter's miss.
            final NetReduceConfig[] configs = new NetReduceConfig[2];
            for (int job = 0; job < 2; job++)
            {
                configs[job] = new NetReduceConfig(job + 1, LanesSystemTest.WINDOW, LanesSystemTest.MSG_LEN,
                    LanesSystemTest.PAYLOAD, TimeUnit.SECONDS.toNanos(10));
                final int firstQpn = 0x11 + job * 0x1_0000;
                rings.add(new WorkerRing(bed, 0, WORLD, r -> new RcConfig().pmtu(LanesSystemTest.PAYLOAD)
                    .firstQpn(firstQpn).retransmitTimeoutNs(TimeUnit.SECONDS.toNanos(1)), configs[job].regionBytes(),
                    configs[job].regionBytes()));
            }
            final List<Future<Long>> runs = new ArrayList<>();
            for (int job = 0; job < 2; job++)
            {
                final WorkerRing ring = rings.get(job);
                final NetReduceConfig config = configs[job];
                runs.add(threads.submit(() ->
                    LanesSystemTest.exactCalls(ring, WORLD, config, "ring " + config.ringId())));
            }
            long aggregations = 0;
            for (final Future<Long> run : runs)
            {
                aggregations += run.get(200, TimeUnit.SECONDS);
            }

            assertThat(appliance.counter(DataplaneCounter.AGGREGATIONS_COMPLETED)).isEqualTo(aggregations);
            for (final WorkerRing ring : rings)
            {
                for (int r = 0; r < WORLD; r++)
                {
                    final RcEndpoint endpoint = ring.endpoint(r);
                    assertThat(endpoint.portFiltersQueuePairs()).isTrue();
                    assertThat(endpoint.framesReceived()).as("its own results and ACKs").isPositive();
                    assertThat(endpoint.unknownQp()).as("job %d rank %d: frames to queue pairs it does not have, of %d",
                        rings.indexOf(ring), r, endpoint.framesReceived()).isZero();
                    assertThat(endpoint.port().counters().rxDropped()).as("its ring never overflowed").isZero();
                }
            }
        }
        finally
        {
            threads.shutdownNow();
            rings.forEach(WorkerRing::close);
        }
    }
}
