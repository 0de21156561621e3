package io.netreduce.dataplane.support;

import io.netreduce.dataplane.ring.Ring;
import io.netreduce.dataplane.ring.RingRuns;

import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.dataplane.agent.DataplaneProxy;
import io.netreduce.dataplane.agent.RingInstalled;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.dataplane.ring.RingDefinition;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A dataplane agent over memory ports, driven synchronously from the test thread (which is the agent thread).
 */
public final class DataplaneHarness implements AutoCloseable
{
    private final List<MemoryPort> ports = new ArrayList<>();
    private final DataplaneAgent agent;
    private final DataplaneProxy proxy;

    public DataplaneHarness(final int portCount, final boolean bumpInTheWire, final long memoryBudget)
    {
        this(portCount, bumpInTheWire, memoryBudget, 0.0, 0);
    }

    /**
     * @param dropProbability fault injection at the appliance: probability of dropping an arriving RoCEv2 frame.
     */
    public DataplaneHarness(
        final int portCount,
        final boolean bumpInTheWire,
        final long memoryBudget,
        final double dropProbability,
        final long dropSeed)
    {
        this(portCount, bumpInTheWire, memoryBudget, dropProbability, dropSeed, RingRuns.DEFAULT_ABANDONED_RUN_NS);
    }

    /**
     * @param abandonedRunNs how long a run with messages in flight may stall before a new one may begin.
     */
    public DataplaneHarness(
        final int portCount,
        final boolean bumpInTheWire,
        final long memoryBudget,
        final double dropProbability,
        final long dropSeed,
        final long abandonedRunNs)
    {
        this(portCount, bumpInTheWire, memoryBudget, dropProbability, dropSeed, abandonedRunNs, context -> context);
    }

    /**
     * One port, one-armed, 1 GiB of aggregator memory, the context changed as {@code settings} says (CLT sizes).
     */
    public DataplaneHarness(final java.util.function.UnaryOperator<DataplaneContext> settings)
    {
        this(1, false, 1L << 30, 0.0, 0, RingRuns.DEFAULT_ABANDONED_RUN_NS, settings);
    }

    private DataplaneHarness(
        final int portCount,
        final boolean bumpInTheWire,
        final long memoryBudget,
        final double dropProbability,
        final long dropSeed,
        final long abandonedRunNs,
        final java.util.function.UnaryOperator<DataplaneContext> settings)
    {
        for (int i = 0; i < portCount; i++)
        {
            ports.add(new MemoryPort("test" + i, MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 4096, 1 << 23));
        }
        final DataplaneContext context = new DataplaneContext()
            .ports(new ArrayList<PacketPort>(ports))
            .memoryBudget(memoryBudget)
            .batchSize(64)
            .dropProbability(dropProbability, dropSeed)
            .abandonedRunNs(abandonedRunNs);
        if (bumpInTheWire)
        {
            context.bumpInTheWire();
        }
        agent = new DataplaneAgent(settings.apply(context));
        proxy = agent.proxy();
    }

    private DataplaneHarness(final DataplaneAgent agent, final MemoryPort port, final DataplaneProxy proxy)
    {
        this.agent = agent;
        this.ports.add(port);
        this.proxy = proxy;
    }

    /**
     * @return a harness over one lane of a multi-lane dataplane: its agent, its one memory port (fed by the test
     *         as the kernel would steer), and the proxy of all lanes. Commands are applied only by this lane's agent.
     */
    public static DataplaneHarness lane(final DataplaneAgent agent, final MemoryPort port, final DataplaneProxy proxy)
    {
        return new DataplaneHarness(agent, port, proxy);
    }

    public DataplaneHarness()
    {
        this(1, false, 1L << 30);
    }

    public MemoryPort port(final int index)
    {
        return ports.get(index);
    }

    public DataplaneProxy proxy()
    {
        return proxy;
    }

    public DataplaneAgent agent()
    {
        return agent;
    }

    public RingInstalled install(final RingDefinition config)
    {
        return await(proxy().installRing(config));
    }

    /**
     * Run duty cycles until the command has been applied, then return its reply.
     */
    public <T> T await(final CompletableFuture<T> reply)
    {
        for (int i = 0; i < 100 && !reply.isDone(); i++)
        {
            agent.doWork();
        }
        try
        {
            return reply.get(1, TimeUnit.SECONDS);
        }
        catch (final java.util.concurrent.ExecutionException ex)
        {
            if (ex.getCause() instanceof RuntimeException runtime)
            {
                throw runtime;
            }
            throw new IllegalStateException(ex);
        }
        catch (final Exception ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * Process everything injected into port 0 and return what port 0 sent.
     */
    public List<byte[]> process(final byte[] frame)
    {
        ports.getFirst().inject(frame);
        return runAndDrain(0);
    }

    /**
     * Run until no port has input left, then return the frames port {@code index} sent.
     */
    public List<byte[]> runAndDrain(final int index)
    {
        runUntilIdle();
        return ports.get(index).drainSent();
    }

    public void runUntilIdle()
    {
        while (agent.doWork() > 0)
        {
            // keep going until every port is drained
        }
    }

    public long counter(final DataplaneCounter counter)
    {
        return agent.counters().get(counter);
    }

    @Override
    public void close()
    {
        agent.onClose();
    }
}
