package io.netreduce.host.switchml;

import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.switchml.SwitchMlJobDefinition;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.SwitchMlHeader;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Our SwitchML workers through the real dataplane on memory ports: every worker's tensor summed exactly (int32,
 * wrapping), with losses on the way to the appliance (its fault injection) and on the way back (dropped here).
 */
class SwitchMlWorkerTest
{
    private static final long SWITCH_MAC = 0x02_00_00_00_00_AAL;
    private static final int SWITCH_IP = 0x0A_4D_00_FE;
    private static final int JOB = 3;

    @ParameterizedTest(name = "W = {0}, {1} elements per packet, loss {2}")
    @CsvSource({ "4, 64, 0.0", "4, 256, 0.01", "4, 1024, 0.05", "8, 256, 0.05", "2, 64, 0.0" })
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldSumEveryWorkersTensorExactlyThroughTheAppliance(final int workers, final int k, final double loss)
    {
        final int outstanding = 16;
        final MemoryPort appliancePort = new MemoryPort("appliance", MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096, 1 << 23);
        final DataplaneAgent appliance = new DataplaneAgent(new DataplaneContext()
            .ports(new ArrayList<PacketPort>(List.of(appliancePort)))
            .memoryBudget(64L << 20)
            .dropProbability(loss, 5));
        final List<SwitchMlJobDefinition.Worker> members = new ArrayList<>();
        for (int w = 0; w < workers; w++)
        {
            members.add(new SwitchMlJobDefinition.Worker(ip(w), SwitchMlJobDefinition.ANY_MAC));
        }
        await(appliance, appliance.proxy().installSwitchMlJob(
            new SwitchMlJobDefinition(JOB, members, k, outstanding, SWITCH_MAC, SWITCH_IP)));

        final AtomicLong now = new AtomicLong();
        final MemoryPort[] ports = new MemoryPort[workers];
        final SwitchMlWorker[] worker = new SwitchMlWorker[workers];
        for (int w = 0; w < workers; w++)
        {
            ports[w] = new MemoryPort("w" + w, MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096, 1 << 23);
            worker[w] = new SwitchMlWorker(new SwitchMlWorker.Config(0x02_00_00_00_01_00L + w, ip(w), 40_000 + w,
                SWITCH_MAC, SWITCH_IP, SwitchMlHeader.PORT_BASE, JOB, k, outstanding, 1_000_000L), ports[w], now::get);
        }
        final SplittableRandom random = new SplittableRandom(workers * 31L + k);
        final SplittableRandom lossBack = new SplittableRandom(9);
        for (int call = 0; call < 3; call++)
        {
            // Not a multiple of k: the last packet is padded.
            final int n = 50 * k + k / 2 + 1;
            final int[][] tensors = new int[workers][n];
            final int[] expected = new int[n];
            for (int w = 0; w < workers; w++)
            {
                for (int i = 0; i < n; i++)
                {
                    tensors[w][i] = random.nextInt();
                    expected[i] += tensors[w][i];
                }
                worker[w].begin(tensors[w]);
            }
            for (int step = 0; !allDone(worker); step++)
            {
                assertThat(step).as("steps of call " + call).isLessThan(200_000);
                now.addAndGet(100_000);
                for (int w = 0; w < workers; w++)
                {
                    worker[w].doWork();
                    for (final byte[] frame : ports[w].drainSent())
                    {
                        appliancePort.inject(frame);
                    }
                }
                while (appliance.doWork() > 0)
                {
                    // drain the appliance
                }
                for (final byte[] result : appliancePort.drainSent())
                {
                    if (lossBack.nextDouble() < loss)
                    {
                        continue;
                    }
                    final int w = (result[33] & 0xFF) - 1; // the destination IPv4 address's last byte is w + 1
                    ports[w].inject(result);
                }
            }
            for (int w = 0; w < workers; w++)
            {
                assertThat(tensors[w]).as("worker " + w + ", call " + call).isEqualTo(expected);
            }
        }
        assertThat(appliance.counters().get(DataplaneCounter.DROP_SWITCHML_NOT_MEMBER)).isZero();
        assertThat(appliance.counters().get(DataplaneCounter.DROP_SWITCHML_WRONG_SIZE)).isZero();
        if (loss > 0)
        {
            long retransmissions = 0;
            for (final SwitchMlWorker each : worker)
            {
                retransmissions += each.retransmissions();
            }
            assertThat(retransmissions).isPositive();
        }
        appliance.onClose();
    }

    private static int ip(final int w)
    {
        return 0x0A_4D_00_01 + w;
    }

    private static boolean allDone(final SwitchMlWorker[] workers)
    {
        for (final SwitchMlWorker worker : workers)
        {
            if (!worker.isDone())
            {
                return false;
            }
        }
        return true;
    }

    private static <T> T await(final DataplaneAgent agent, final CompletableFuture<T> reply)
    {
        for (int i = 0; i < 100 && !reply.isDone(); i++)
        {
            agent.doWork();
        }
        return reply.join();
    }
}
