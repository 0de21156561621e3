package io.netreduce.daemon;

import io.netreduce.controlplane.config.DataplaneConfig;
import io.netreduce.controlplane.config.IdleStrategyKind;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.PortConfig;
import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.dataplane.agent.DataplaneLanes;
import io.netreduce.dataplane.agent.DataplaneProxy;
import io.netreduce.dataplane.agent.LaneSteering;
import io.netreduce.dataplane.agent.PacketPathWarmUp;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.ClassicBpfProgram;
import io.netreduce.protocol.port.LaneSteeringProgram;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.port.PortPollIdleStrategy;
import io.netreduce.protocol.port.PortPoller;
import io.netreduce.protocol.port.ThreadNice;
import org.agrona.concurrent.AgentRunner;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SleepingMillisIdleStrategy;
import org.agrona.concurrent.YieldingIdleStrategy;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiFunction;
import java.util.function.Function;

import static io.netreduce.daemon.PacketDataplane.EXIT_DATAPLANE_FAILED;
import static io.netreduce.daemon.PacketDataplane.START_TIMEOUT_MS;

/**
 * The running dataplane: the configured ports, opened once per lane, and one {@link DataplaneAgent} per lane, each
 * on its own thread at the configured nice value, its idle strategy polling the lane's ports. With lanes > 1 a
 * classic BPF classifier on every port's fanout group, rewritten whenever the rings change, steers each ring's
 * frames to the lane that owns the ring ({@link DataplaneLanes}).
 */
final class LaneRunners
{
    /** The dataplane's one logger, as before its parts had classes of their own: operators grep its name. */
    private static final Logger LOG = LoggerFactory.getLogger(PacketDataplane.class);
    /**
     * Made-up ring frames the dataplane runs through a private copy of its packet path before it serves
     * ({@link PacketPathWarmUp}), so that a fresh daemon's first job does not pay the JIT: 65,536 (about a second
     * of one core on the test bed), the JVM property {@code netreduce.warmUpFrames} to change it, 0 for none.
     */
    static final long WARM_UP_FRAMES = Long.getLong("netreduce.warmUpFrames", 65_536L);

    private final Function<PortConfig, PacketPort> portOpener;
    private final Function<List<PortConfig>, AfPacketConfiguration> warmUpPortSettings;
    private final BiFunction<PortConfig, Integer, List<PacketPort>> lanePortOpener;
    /** For each lane, its ports in configuration order (every open port is in one lane's list). */
    private final List<List<PacketPort>> lanePorts = new ArrayList<>();
    private DataplaneLanes lanes;
    private DataplaneProxy proxy;
    private final List<AgentRunner> runners = new ArrayList<>();
    private final List<PortPoller> pollers = new ArrayList<>();

    /**
     * @param portOpener     opens one configured port for a single lane.
     * @param lanePortOpener opens one configured port once per lane, as members of one fanout group, member i for
     *                       lane i.
     * @param warmUpPortSettings  from the configured ports, the settings of the port the warm-up opens on the loopback
     *                       interface, or null for a warm-up in memory.
     */
    LaneRunners(
        final Function<PortConfig, PacketPort> portOpener,
        final BiFunction<PortConfig, Integer, List<PacketPort>> lanePortOpener,
        final Function<List<PortConfig>, AfPacketConfiguration> warmUpPortSettings)
    {
        this.portOpener = portOpener;
        this.lanePortOpener = lanePortOpener;
        this.warmUpPortSettings = warmUpPortSettings;
    }

    /**
     * Open the ports, start every lane's agent on its thread and wait for their warm-up.
     */
    void start(final NetreduceConfig config)
    {
        final DataplaneConfig settings = config.appliance().dataplane();
        final int laneCount = settings.lanes();
        for (int lane = 0; lane < laneCount; lane++)
        {
            lanePorts.add(new ArrayList<>());
        }
        try
        {
            for (final PortConfig port : config.appliance().ports())
            {
                final List<PacketPort> members = laneCount == 1 ? List.of(portOpener.apply(port)) :
                    lanePortOpener.apply(port, laneCount);
                for (int lane = 0; lane < laneCount; lane++)
                {
                    lanePorts.get(lane).add(members.get(lane));
                }
            }
        }
        catch (final RuntimeException ex)
        {
            closePorts();
            throw ex;
        }
        final List<PacketPort> portsOfLane0 = lanePorts.getFirst();
        final DataplaneContext context = new DataplaneContext()
            .ports(portsOfLane0)
            .batchSize(settings.batchSize())
            .commandQueueCapacity(settings.commandQueueCapacity())
            .memoryBudget(config.appliance().memoryBudget())
            .cltEntries(settings.cltEntries())
            .cltForeignEntries(settings.cltForeignEntries())
            .cltForeignPerSource(settings.cltForeignPerSource())
            .dropProbability(settings.dropProbability(), settings.dropSeed())
            .ecnBacklog(settings.ecnBacklog())
            .warmUpFrames(WARM_UP_FRAMES)
            .warmUpPortSettings(warmUpPortSettings.apply(config.appliance().ports()));
        if (portsOfLane0.size() == 2)
        {
            context.bumpInTheWire();
        }
        else
        {
            context.oneArmed();
        }
        lanes = new DataplaneLanes(context, lanePorts.stream().map(List::copyOf).toList(),
            laneCount == 1 ? LaneSteering.NONE : this::steer);
        proxy = lanes.proxy();
        for (int lane = 0; lane < laneCount; lane++)
        {
            final PortPoller poller = new PortPoller(lanePorts.get(lane));
            pollers.add(poller);
            final AgentRunner runner = new AgentRunner(idleStrategy(settings.idleStrategy(), poller),
                this::onDataplaneError, null, lanes.agent(lane));
            runners.add(runner);
            AgentRunner.startOnThread(runner, laneThreads(settings.laneNice(), lane));
        }
        awaitWarmUp();
    }

    /**
     * @return whether {@link #start} got as far as the lanes: commands can be sent.
     */
    boolean isStarted()
    {
        return proxy != null;
    }

    DataplaneProxy proxy()
    {
        if (proxy == null)
        {
            throw new IllegalStateException("dataplane not started");
        }
        return proxy;
    }

    /**
     * @return the fewest frames a lane's port's receive queue holds, 0 when no port can tell.
     */
    int smallestReceiveCapacity()
    {
        int smallest = Integer.MAX_VALUE;
        for (final List<PacketPort> lane : lanePorts)
        {
            for (final PacketPort port : lane)
            {
                final int capacity = port.receiveCapacity();
                if (capacity > 0)
                {
                    smallest = Math.min(smallest, capacity);
                }
            }
        }
        return smallest == Integer.MAX_VALUE ? 0 : smallest;
    }

    /**
     * @return for each lane, its ports in configuration order (empty before {@link #start} and after {@link #close}).
     */
    List<List<PacketPort>> lanePorts()
    {
        return lanePorts;
    }

    /**
     * Lane threads that first take the configured nice value (dataplane.laneNice), or say why they keep theirs.
     */
    private static ThreadFactory laneThreads(final int nice, final int lane)
    {
        return task -> new Thread(() ->
        {
            final String refusal = ThreadNice.applyToCurrentThread(nice);
            if (refusal != null)
            {
                LOG.warn("lane {} keeps its nice value, so its rings slow down when the box's cores are busy: {}",
                    lane, refusal);
            }
            task.run();
        });
    }

    /**
     * The lanes' steering: one classifier for every port's fanout group (the same rings on every port), built from
     * the proxy's routes. Called by the proxy under its lock.
     */
    private void steer(final List<LaneSteeringProgram.Route> routes)
    {
        final LaneSteeringProgram steering = new LaneSteeringProgram();
        routes.forEach(steering::route);
        final ClassicBpfProgram program = steering.build();
        for (final PacketPort port : lanePorts.getFirst())
        {
            if (!(port instanceof AfPacketPort fanout))
            {
                throw new IllegalStateException("port " + port.name() + " cannot be steered to lanes");
            }
            fanout.steer(program);
        }
        LOG.info("lane steering: {} ring edge(s) steered to their lanes ({} classic BPF instructions per port)",
            routes.size(), program.length());
    }

    /**
     * An exception from one duty cycle is logged and the agent goes on. An {@link Error} (a missing class, out of
     * memory) means the dataplane can no longer be trusted: a daemon that keeps serving its API while forwarding
     * nothing would hide the failure, so the process exits non-zero and systemd restarts it.
     */
    private void onDataplaneError(final Throwable error)
    {
        if (error instanceof Error)
        {
            LOG.error("dataplane thread failed; the daemon exits (status {})", EXIT_DATAPLANE_FAILED, error);
            final Thread exit = new Thread(() -> System.exit(EXIT_DATAPLANE_FAILED), "netreduce-dataplane-failed");
            exit.setDaemon(true);
            exit.start();
            return;
        }
        LOG.error("dataplane error", error);
    }

    private static IdleStrategy idleStrategy(final IdleStrategyKind kind, final PortPoller poller)
    {
        return switch (kind)
        {
            case POLL -> new PortPollIdleStrategy(poller);
            case BUSY_SPIN -> new BusySpinIdleStrategy();
            case YIELD -> new YieldingIdleStrategy();
            // Park at most 100 us: an idle appliance must still answer the first packet of a burst quickly.
            case BACKOFF -> new BackoffIdleStrategy(10, 20, 1_000, 100_000);
            case SLEEP -> new SleepingMillisIdleStrategy(1);
        };
    }

    /**
     * Wait for the agent's warm-up (the summation kernels compiled on its thread) before the first command, so that
     * the commands' own timeout measures the dataplane, not the JIT: on a loaded 2-core box the warm-up took over
     * 5 s and the first ring install failed the start.
     */
    private void awaitWarmUp()
    {
        final long startNs = System.nanoTime();
        try
        {
            for (final DataplaneAgent agent : lanes.agents())
            {
                agent.ready().get(Math.max(1, START_TIMEOUT_MS - TimeUnit.NANOSECONDS.toMillis(
                    System.nanoTime() - startNs)), TimeUnit.MILLISECONDS);
            }
        }
        catch (final TimeoutException ex)
        {
            throw new IllegalStateException("the dataplane did not finish warming up within " + START_TIMEOUT_MS +
                " ms", ex);
        }
        catch (final ExecutionException ex)
        {
            throw new IllegalStateException("the dataplane failed to start: " + ex.getCause().getMessage(), ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while the dataplane warmed up", ex);
        }
        // set by lane 0's onStart before its ready() completed, which the loop above waited for
        final PacketPathWarmUp.Report warmUp = lanes.agent(0).warmUp();
        if (!warmUp.clean())
        {
            // a bug, not the network's: the made-up traffic is valid ring traffic
            LOG.warn("the packet path's warm-up was not clean: {}", warmUp);
        }
        LOG.info("dataplane warmed up in {} ms (the packet path: {} made-up frames in {} ms, port {}, the JIT " +
            "settling in {} passes)", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNs), warmUp.frames(),
            TimeUnit.NANOSECONDS.toMillis(warmUp.nanos()), warmUp.port(), warmUp.passes());
    }

    /**
     * Stop each lane's duty cycle after the batch in hand, close its agent (tables, aggregator memory), then the
     * ports.
     */
    void close()
    {
        runners.forEach(AgentRunner::close);
        runners.clear();
        pollers.forEach(PortPoller::close);
        pollers.clear();
        closePorts();
    }

    private void closePorts()
    {
        for (final List<PacketPort> lane : lanePorts)
        {
            for (final PacketPort port : lane)
            {
                try
                {
                    port.close();
                }
                catch (final RuntimeException ex)
                {
                    LOG.warn("closing port {}: {}", port.name(), ex.toString());
                }
            }
        }
        lanePorts.clear();
    }
}
