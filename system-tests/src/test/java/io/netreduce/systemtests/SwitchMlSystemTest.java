package io.netreduce.systemtests;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.host.switchml.ExponentQuantizer;
import io.netreduce.host.switchml.SwitchMlWorker;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.wire.SwitchMlHeader;
import io.netreduce.switchml.controller.PacketSizeCode;
import io.netreduce.switchml.controller.SwitchMlControllerClient;
import io.netreduce.switchml.controller.UdpSessionReply;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * SwitchML end to end on the namespace test bed: W workers (our SwitchML worker on an AF_PACKET port in each worker
 * namespace) address the bed's SwitchML "switch" (10.77.0.254), the switch redirects their UDP to the appliance, the
 * daemon's dataplane sums them in a job of its configuration and answers each worker; every result must be the
 * exact int32 sum on every call, with loss at the appliance.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class SwitchMlSystemTest
{
    static final long SWITCH_MAC = 0x02_77_00_00_00_FEL;
    static final int SWITCH_IP = 0x0A_4D_00_FE;
    private static final int CALLS = 3;
    private static TestBed bed;

    @BeforeAll
    static void up()
    {
        Assumptions.assumeTrue(TestBed.isRoot(), "system tests need root (network namespaces)");
        bed = TestBed.up('s', 4, 9000, false);
    }

    @AfterAll
    static void down()
    {
        if (bed != null)
        {
            bed.close();
        }
    }

    static String job(final String name, final int world, final int elements, final int pool)
    {
        final StringBuilder workers = new StringBuilder();
        for (int r = 0; r < world; r++)
        {
            workers.append("            - { rank: ").append(r).append(", ip: 10.77.0.").append(r + 1).append(" }\n");
        }
        return """
            jobs:
              - name: %s
                switchml:
                  elementsPerPacket: %d
                  poolSize: %d
                  workers:
            %s""".formatted(name, elements, pool, workers);
    }

    @ParameterizedTest(name = "W={0} elements={1} loss={2}")
    @CsvSource({ "2, 64, 0.0", "4, 256, 0.01", "4, 1024, 0.05" })
    void shouldGiveEveryWorkerTheExactSumThroughTheAppliance(final int world, final int elements, final double loss)
        throws Exception
    {
        final int outstanding = 32;
        try (Appliance appliance = Appliance.startSwitchMl(bed, loss, job("sml", world, elements, outstanding), null))
        {
            final AfPacketPort[] ports = new AfPacketPort[world];
            final SwitchMlWorker[] workers = new SwitchMlWorker[world];
            try
            {
                for (int r = 0; r < world; r++)
                {
                    ports[r] = WorkerRing.openPort(bed.workerNamespace(r));
                    workers[r] = new SwitchMlWorker(new SwitchMlWorker.Config(TestBed.workerMac(r),
                        0x0A_4D_00_01 + r, 40_000 + r, SWITCH_MAC, SWITCH_IP, SwitchMlHeader.PORT_BASE, 0, world, elements,
                        outstanding, 2_000_000L), ports[r], System::nanoTime);
                }
                final SplittableRandom random = new SplittableRandom(world * 1000L + elements);
                final ExecutorService pool = Executors.newFixedThreadPool(world);
                try
                {
                    for (int call = 0; call < CALLS; call++)
                    {
                        // Not a multiple of the packet: the last packet is padded.
                        final int n = 300 * elements + elements / 2 + 3;
                        final int[][] tensors = new int[world][n];
                        final int[] expected = new int[n];
                        for (int r = 0; r < world; r++)
                        {
                            for (int i = 0; i < n; i++)
                            {
                                tensors[r][i] = random.nextInt();
                                expected[i] += tensors[r][i];
                            }
                        }
                        onEveryRank(pool, world, rank -> workers[rank].allreduce(tensors[rank],
                            TimeUnit.SECONDS.toNanos(20), new BackoffIdleStrategy()));
                        for (int r = 0; r < world; r++)
                        {
                            assertThat(tensors[r]).as("call " + call + " rank " + r).isEqualTo(expected);
                        }
                    }
                }
                finally
                {
                    pool.shutdownNow();
                }
                final long packets = appliance.counter(DataplaneCounter.SWITCHML_PACKETS);
                final int perCall = (300 * elements + elements / 2 + 3 + elements - 1) / elements;
                assertThat(packets).as("every worker's packet added once").isEqualTo((long)CALLS * perCall * world);
                assertThat(appliance.counter(DataplaneCounter.SWITCHML_COMPLETIONS)).isEqualTo((long)CALLS * perCall);
                if (loss > 0)
                {
                    assertThat(appliance.counter(DataplaneCounter.DROP_INJECTED)).isPositive();
                }
                assertThat(appliance.request("GET", "/v1/switchml", null, null).body())
                    .contains("\"name\":\"sml\"").contains("\"completions\":" + (CALLS * perCall));
            }
            finally
            {
                for (final AfPacketPort port : ports)
                {
                    if (port != null)
                    {
                        port.close();
                    }
                }
            }
        }
    }

    /**
     * fp32 through a session the workers open at the daemon's controller, as the published client does (the
     * controller listens in the test's namespace, on loopback; the workers' packets come from their namespaces):
     * every result within the quantizer's bound of the exact sum, with loss at the appliance.
     */
    @org.junit.jupiter.api.Test
    void shouldSumFp32WithinTheBoundThroughASessionOpenedAtTheController() throws Exception
    {
        final int world = 4;
        final int elements = 256;
        final int outstanding = 64;
        try (Appliance appliance = Appliance.startSwitchMl(bed, 0.01, "", "127.0.0.1:0"))
        {
            final int controller = appliance.switchMlControllerPort();
            final AfPacketPort[] ports = new AfPacketPort[world];
            final ExecutorService pool = Executors.newFixedThreadPool(world);
            try
            {
                final List<Future<SwitchMlWorker>> registered = new ArrayList<>();
                for (int r = 0; r < world; r++)
                {
                    final int rank = r;
                    ports[r] = WorkerRing.openPort(bed.workerNamespace(r));
                    registered.add(pool.submit(() ->
                    {
                        try (SwitchMlControllerClient client = new SwitchMlControllerClient("127.0.0.1", controller))
                        {
                            final UdpSessionReply reply = client.register(rank, world, TestBed.workerMac(rank),
                                0x0A_4D_00_01 + rank, PacketSizeCode.of(elements));
                            return new SwitchMlWorker(new SwitchMlWorker.Config(TestBed.workerMac(rank),
                                0x0A_4D_00_01 + rank, 40_000 + rank, reply.mac(), reply.ipv4(),
                                SwitchMlHeader.PORT_BASE, 0, world, elements, outstanding, 2_000_000L), ports[rank],
                                System::nanoTime);
                        }
                    }));
                }
                final SwitchMlWorker[] workers = new SwitchMlWorker[world];
                for (int r = 0; r < world; r++)
                {
                    workers[r] = registered.get(r).get(60, TimeUnit.SECONDS);
                }
                final ExponentQuantizer quantizer = new ExponentQuantizer(world);
                final SplittableRandom random = new SplittableRandom(17);
                for (int call = 0; call < CALLS; call++)
                {
                    final int n = 200 * elements + 5;
                    final float[][] tensors = new float[world][n];
                    for (int r = 0; r < world; r++)
                    {
                        for (int i = 0; i < n; i++)
                        {
                            // Blocks of different magnitudes, and signs.
                            tensors[r][i] =
                                (float)((random.nextDouble() - 0.5) * Math.scalb(1.0, (i / elements) % 20 - 10));
                        }
                    }
                    final double[] exact = new double[n];
                    for (int r = 0; r < world; r++)
                    {
                        for (int i = 0; i < n; i++)
                        {
                            exact[i] += tensors[r][i];
                        }
                    }
                    final int[] exponents = new int[(n + elements - 1) / elements];
                    java.util.Arrays.fill(exponents, ExponentQuantizer.MIN_EXPONENT);
                    for (int r = 0; r < world; r++)
                    {
                        for (int b = 0; b < exponents.length; b++)
                        {
                            final int from = b * elements;
                            exponents[b] = Math.max(exponents[b],
                                ExponentQuantizer.exponent(tensors[r], from, Math.min(elements, n - from)));
                        }
                    }
                    onEveryRank(pool, world, rank -> workers[rank].allreduce(tensors[rank],
                        TimeUnit.SECONDS.toNanos(20), new BackoffIdleStrategy()));
                    for (int r = 0; r < world; r++)
                    {
                        for (int i = 0; i < n; i++)
                        {
                            final double bound = quantizer.errorBound(exponents[i / elements], exact[i]);
                            assertThat(Math.abs(tensors[r][i] - exact[i])).as("call %d rank %d element %d", call, r, i)
                                .isLessThanOrEqualTo(bound);
                        }
                    }
                    for (int r = 1; r < world; r++)
                    {
                        assertThat(tensors[r]).as("every rank the same result").isEqualTo(tensors[0]);
                    }
                }
                assertThat(appliance.request("GET", "/v1/switchml", null, null).body())
                    .contains("\"origin\":\"controller\"").contains("\"elementsPerPacket\":256");
                assertThat(appliance.counter(DataplaneCounter.DROP_INJECTED)).isPositive();
            }
            finally
            {
                pool.shutdownNow();
                for (final AfPacketPort port : ports)
                {
                    if (port != null)
                    {
                        port.close();
                    }
                }
            }
        }
    }

    /**
     * Run one call on every rank at once, each on its own thread, and wait for all of them.
     */
    private static void onEveryRank(
        final ExecutorService pool, final int world, final java.util.function.IntConsumer call) throws Exception
    {
        final List<Future<?>> running = new ArrayList<>();
        for (int r = 0; r < world; r++)
        {
            final int rank = r;
            running.add(pool.submit(() -> call.accept(rank)));
        }
        for (final Future<?> future : running)
        {
            future.get(60, TimeUnit.SECONDS);
        }
    }
}
