package io.netreduce.host.switchml;

import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.switchml.SwitchMlJobDefinition;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.SwitchMlHeader;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Predicate;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The real dataplane and W SwitchML workers on memory ports, on a simulated clock: frames lost on the way to the
 * appliance (its fault injection) and on the way back (dropped here), both seeded. A job is found by its workers'
 * addresses; its id here is nothing the workers send.
 */
final class SwitchMlBed implements AutoCloseable
{
    static final long SWITCH_MAC = 0x02_00_00_00_00_AAL;
    static final int SWITCH_IP = 0x0A_4D_00_FE;
    static final long TIMEOUT_NS = 1_000_000L;
    /** Simulated time per step by default: a packet without its result is sent again after 10 steps. */
    private static final long STEP_NS = 100_000L;

    private final int workers;
    private final double loss;
    private final MemoryPort appliancePort;
    private final DataplaneAgent appliance;
    private final MemoryPort[] ports;
    private final AtomicLong now = new AtomicLong();
    private final SplittableRandom lossBack;
    private final Consumer<byte[]>[] taps;
    private Predicate<byte[]> dropBack = result -> false;
    private long stepNs = STEP_NS;

    /**
     * @param loss the probability that a frame is lost on the way to the appliance, and the same on the way back.
     * @param seed the seed of both losses.
     */
    @SuppressWarnings("unchecked")
    SwitchMlBed(final int workers, final double loss, final long seed)
    {
        this.workers = workers;
        this.loss = loss;
        this.appliancePort = new MemoryPort("appliance", MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096, 1 << 23);
        this.appliance = new DataplaneAgent(new DataplaneContext()
            .ports(new ArrayList<PacketPort>(List.of(appliancePort)))
            .memoryBudget(64L << 20)
            .dropProbability(loss, seed));
        this.lossBack = new SplittableRandom(seed * 31 + 7);
        this.ports = new MemoryPort[workers];
        this.taps = new Consumer[workers];
        for (int w = 0; w < workers; w++)
        {
            ports[w] = new MemoryPort("w" + w, MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096, 1 << 23);
        }
    }

    static int ip(final int w)
    {
        return 0x0A_4D_00_01 + w;
    }

    /**
     * Install job {@code id} with every worker of the bed.
     */
    void install(final int id, final int elementsPerPacket, final int poolSize)
    {
        final List<SwitchMlJobDefinition.Worker> members = new ArrayList<>();
        for (int w = 0; w < workers; w++)
        {
            members.add(new SwitchMlJobDefinition.Worker(ip(w), SwitchMlJobDefinition.ANY_MAC));
        }
        await(appliance.proxy().installSwitchMlJob(
            new SwitchMlJobDefinition(id, members, elementsPerPacket, poolSize, SWITCH_MAC, SWITCH_IP)));
    }

    void remove(final int id)
    {
        await(appliance.proxy().removeSwitchMlJob(id));
    }

    /**
     * @return a worker for every port, the first call carrying {@code firstJobByte}.
     */
    SwitchMlWorker[] workers(final int firstJobByte, final int elementsPerPacket, final int outstanding)
    {
        final SwitchMlWorker[] worker = new SwitchMlWorker[workers];
        for (int w = 0; w < workers; w++)
        {
            worker[w] = new SwitchMlWorker(new SwitchMlWorker.Config(0x02_00_00_00_01_00L + w, ip(w), 40_000 + w,
                SWITCH_MAC, SWITCH_IP, SwitchMlHeader.PORT_BASE, firstJobByte, workers, elementsPerPacket,
                outstanding, TIMEOUT_NS), ports[w], now::get);
        }
        return worker;
    }

    /**
     * Let {@code nanos} of simulated time pass per step: a round trip takes a step or two.
     */
    void stepNs(final long nanos)
    {
        stepNs = nanos;
    }

    MemoryPort port(final int w)
    {
        return ports[w];
    }

    /**
     * Watch every result that reaches worker {@code w} (a copy, before the worker takes it).
     */
    void tap(final int w, final Consumer<byte[]> tap)
    {
        taps[w] = tap;
    }

    /**
     * Lose, besides the random losses, every result on the way back that {@code drop} picks.
     */
    void dropBack(final Predicate<byte[]> drop)
    {
        dropBack = drop;
    }

    long counter(final DataplaneCounter counter)
    {
        return appliance.counters().get(counter);
    }

    /**
     * Run the started calls until every worker has all its results.
     */
    void drive(final SwitchMlWorker[] worker)
    {
        for (int step = 0; !allDone(worker); step++)
        {
            assertThat(step).as("steps").isLessThan(200_000);
            now.addAndGet(stepNs);
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
                if ((loss > 0 && lossBack.nextDouble() < loss) || dropBack.test(result))
                {
                    continue;
                }
                final int w = (result[33] & 0xFF) - 1; // the destination IPv4 address's last byte is w + 1
                if (taps[w] != null)
                {
                    taps[w].accept(result.clone());
                }
                ports[w].inject(result);
            }
        }
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

    private <T> T await(final CompletableFuture<T> reply)
    {
        for (int i = 0; i < 100 && !reply.isDone(); i++)
        {
            appliance.doWork();
        }
        return reply.join();
    }

    @Override
    public void close()
    {
        appliance.onClose();
    }
}
