package io.netreduce.daemon;

import io.netreduce.controlplane.api.ApplianceControl;
import io.netreduce.controlplane.api.CaptureInfo;
import io.netreduce.controlplane.api.CaptureRequest;
import io.netreduce.controlplane.api.ReloadResult;
import io.netreduce.controlplane.api.RingStatus;
import io.netreduce.controlplane.config.ConfigException;
import io.netreduce.controlplane.config.JobConfig;
import io.netreduce.controlplane.api.CltEntry;
import io.netreduce.controlplane.api.CttEntry;
import io.netreduce.controlplane.api.ConfiguredAppliance;
import io.netreduce.controlplane.api.LatencySummary;
import io.netreduce.controlplane.api.NotFoundException;
import io.netreduce.controlplane.api.RingInstaller;
import io.netreduce.controlplane.api.CounterValue;
import io.netreduce.controlplane.api.RingOccupancy;
import io.netreduce.controlplane.config.DataplaneConfig;
import io.netreduce.controlplane.config.IdleStrategyKind;
import io.netreduce.controlplane.config.MemberConfig;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.PortConfig;
import io.netreduce.controlplane.config.PortType;
import io.netreduce.controlplane.config.RingRef;
import io.netreduce.controlplane.metrics.MetricsSink;
import io.netreduce.controlplane.metrics.MetricsSource;
import io.netreduce.dataplane.agent.ConnectionEntry;
import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.dataplane.agent.DataplaneLanes;
import io.netreduce.dataplane.agent.LaneSteering;
import io.netreduce.dataplane.agent.DataplaneProxy;
import io.netreduce.dataplane.agent.PendingAggregator;
import io.netreduce.dataplane.agent.RingInstalled;
import io.netreduce.dataplane.capture.CaptureTap;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.counters.RingCounter;
import io.netreduce.protocol.port.PortPollIdleStrategy;
import io.netreduce.protocol.port.PortPoller;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.AfXdpConfiguration;
import io.netreduce.protocol.port.AfXdpPort;
import io.netreduce.protocol.port.ClassicBpfProgram;
import io.netreduce.protocol.port.LaneSteeringProgram;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.port.PortCounters;
import io.netreduce.protocol.port.ThreadNice;
import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.agent.AggregatorUsage;
import io.netreduce.controlplane.config.RingConfig;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.daemon.capture.CaptureManager;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.AgentRunner;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SleepingMillisIdleStrategy;
import org.agrona.concurrent.YieldingIdleStrategy;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetAddress;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiFunction;
import java.util.function.Function;

/**
 * The real dataplane behind the daemon: opens the configured ports, runs one {@link DataplaneAgent} per lane, each on
 * its own thread, turns validated ring changes into install/remove commands on the owning lane's bounded queue,
 * answers the API's table queries through snapshot commands, and publishes the counters and the latency histogram.
 * <p>
 * With {@code lanes} > 1 every port is opened once per lane as an AF_PACKET fanout group, and a classic BPF
 * classifier, rewritten whenever the rings change, steers each ring's frames to the lane that owns the ring
 * ({@link DataplaneLanes}).
 * <p>
 * Forwarding follows the port count: one port is one-armed (results leave where traffic came in, as behind an
 * ACL redirect); two ports are a bump in the wire (what arrives on one leaves on the other).
 */
public final class PacketDataplane implements DataplaneAttachment
{
    /** How long the control thread waits for the dataplane to apply a command. */
    public static final long COMMAND_TIMEOUT_MS = 5_000;

    /** Longest wait for the agent's warm-up at start (a few hundred ms on an idle core). */
    public static final long START_TIMEOUT_MS = 120_000;
    /** Process exit status when the dataplane thread fails with an {@link Error}. */
    public static final int EXIT_DATAPLANE_FAILED = 70;
    /** How many of a ring's oldest incomplete aggregators the occupancy view lists. */
    public static final int OCCUPANCY_LIMIT = 16;
    /** Latency histogram bucket bounds exported to Prometheus, in seconds. */
    private static final double[] LATENCY_BOUNDS_SECONDS = {
        1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 0.1, 0.5, 1.0, Double.POSITIVE_INFINITY };

    private static final Logger LOG = LoggerFactory.getLogger(PacketDataplane.class);

    private final Function<PortConfig, PacketPort> portOpener;
    private final BiFunction<PortConfig, Integer, List<PacketPort>> lanePortOpener;
    /** For each lane, its ports in configuration order (every open port is in one lane's list). */
    private final List<List<PacketPort>> lanePorts = new ArrayList<>();
    private final Map<Integer, String> ringJobs = new ConcurrentHashMap<>();
    private DataplaneLanes lanes;
    private DataplaneProxy proxy;
    private final List<AgentRunner> runners = new ArrayList<>();
    private final List<PortPoller> pollers = new ArrayList<>();
    private CaptureManager captures;
    private DropBurstWatcher dropWatcher;
    private ForeignTagReporter tagReporter;
    /** The rings installed, for the reporter's messages (written by the control thread, read by the reporter). */
    private final Map<Integer, RingDefinition> installedRings = new ConcurrentHashMap<>();
    /** The configuration side, for the CTT metrics (set when the daemon asks for the API's control). */
    private volatile ConfiguredAppliance configured;
    /** This appliance's name: its role (leaf of a rack, spine) in every multi-rack ring. */
    private volatile String applianceName;

    /**
     * @param portOpener opens one configured port (AF_PACKET in the daemon, memory ports in tests); one lane only.
     */
    public PacketDataplane(final Function<PortConfig, PacketPort> portOpener)
    {
        this(portOpener, (port, count) ->
        {
            throw new IllegalArgumentException("appliance.dataplane.lanes: " + count + " lanes need AF_PACKET ports");
        });
    }

    /**
     * @param portOpener     opens one configured port for a single lane.
     * @param lanePortOpener opens one configured port once per lane, as members of one fanout group, member i for
     *                       lane i.
     */
    public PacketDataplane(
        final Function<PortConfig, PacketPort> portOpener,
        final BiFunction<PortConfig, Integer, List<PacketPort>> lanePortOpener)
    {
        this.portOpener = portOpener;
        this.lanePortOpener = lanePortOpener;
    }

    /**
     * @return a dataplane on AF_PACKET ports with default ring sizes (jumbo transmit slots when the MTU needs them).
     */
    public static PacketDataplane onAfPacketPorts()
    {
        return new PacketDataplane(PacketDataplane::openPort, PacketDataplane::openLanePorts);
    }

    /**
     * Open one configured port once per lane, as {@link #openPort} would, the sockets in one fanout group.
     */
    public static List<PacketPort> openLanePorts(final PortConfig port, final int lanes)
    {
        if (port.type() != PortType.AF_PACKET)
        {
            throw new IllegalArgumentException("port " + port.name() + ": lanes need an af_packet port");
        }
        return List.copyOf(AfPacketPort.openFanout(afPacketConfiguration(port), lanes));
    }

    /**
     * Open one configured port as the daemon does: AF_PACKET with default ring sizes, jumbo transmit slots when the
     * MTU needs them, or AF_XDP when the port's type says so. Public so that a harness can open the port inside
     * another network namespace ({@code NetworkNamespace.callIn}) and still get the daemon's exact port set-up.
     */
    public static PacketPort openPort(final PortConfig port)
    {
        if (port.type() == PortType.AF_XDP)
        {
            return openAfXdpPort(port);
        }
        return AfPacketPort.open(afPacketConfiguration(port));
    }

    private static AfPacketConfiguration afPacketConfiguration(final PortConfig port)
    {
        AfPacketConfiguration configuration = AfPacketConfiguration.defaults(port.name());
        if (port.mtu() + EthernetHeader.LENGTH + EthernetHeader.VLAN_TAG_LENGTH >
            AfPacketConfiguration.DEFAULT_TX_FRAME_SIZE - 64)
        {
            configuration = configuration.withTxRing(
                AfPacketConfiguration.JUMBO_TX_FRAME_SIZE, AfPacketConfiguration.DEFAULT_TX_FRAME_COUNT);
        }
        // The appliance's neighbours send wire frames (NICs; the bed's workers segment in their own kernels): its
        // offload is on the transmit side, and its receive ring has MTU-sized slots, 32 MiB of them
        // (withRxForWireFrames).
        return port.segmentationOffload() ? configuration.withSegmentationOffload(true).withRxForWireFrames() :
            configuration;
    }

    /**
     * A port of type {@code af_xdp}: the XDP program attached (native hook where the driver has one), the socket
     * bound zero-copy where the driver allows, default ring sizes; how it was bound is logged.
     */
    private static PacketPort openAfXdpPort(final PortConfig port)
    {
        final AfXdpPort xdp = AfXdpPort.open(AfXdpConfiguration.defaults(port.name()));
        LOG.info("port {}: AF_XDP queue {} bound {} (MTU {})", port.name(), xdp.configuration().queueId(),
            xdp.mode(), xdp.mtu());
        return xdp;
    }

    @Override
    public void start(final NetreduceConfig config)
    {
        final DataplaneConfig settings = config.appliance().dataplane();
        applianceName = config.appliance().name();
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
            .dropProbability(settings.dropProbability(), settings.dropSeed());
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
        captures = new CaptureManager(proxy, portsOfLane0.stream().map(PacketPort::name).toList(),
            Path.of(config.appliance().captureDirectory()), CaptureTap.DEFAULT_RING_CAPACITY, COMMAND_TIMEOUT_MS);
        dropWatcher = DropBurstWatcher.start(proxy::counter, portDrops());
        tagReporter = ForeignTagReporter.start(proxy, installedRings::values);
        LOG.info("dataplane started: {} port(s) {} ({}), {} lane(s) at nice {}, batch {}, idle {}{}",
            portsOfLane0.size(), portsOfLane0.stream().map(PacketPort::name).toList(),
            portsOfLane0.size() == 2 ? "bump in the wire" : "one-armed", laneCount, settings.laneNice(),
            settings.batchSize(), settings.idleStrategy().configName(),
            settings.dropProbability() > 0 ? ", FAULT INJECTION drop probability " + settings.dropProbability() : "");
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

    @Override
    public RingInstaller installer()
    {
        return new RingInstaller()
        {
            @Override
            public void install(final RingRef ring)
            {
                final RingDefinition config = toDataplane(ring, applianceName);
                final RingInstalled installed = await(proxy().installRing(config), "install ring " + config.ringId());
                ringJobs.put(config.ringId(), ring.job());
                installedRings.put(config.ringId(), config);
                LOG.info("ring {} of job {} installed{}: {} ranks, {} aggregators, {} bytes (budget used {} of {})",
                    installed.ringId(), ring.job(), describeRole(config), config.worldSize(),
                    installed.aggregators(), installed.memoryBytes(), installed.budgetUsedBytes(),
                    installed.budgetBytes());
            }

            @Override
            public void remove(final RingRef ring)
            {
                await(proxy().removeRing(ring.ring().id()), "remove ring " + ring.ring().id());
                ringJobs.remove(ring.ring().id());
                installedRings.remove(ring.ring().id());
                LOG.info("ring {} of job {} removed: its traffic now passes through", ring.ring().id(), ring.job());
            }
        };
    }

    private static String describeRole(final RingDefinition ring)
    {
        final Hierarchy hierarchy = ring.hierarchy();
        return switch (hierarchy.tier())
        {
            case FLAT -> "";
            case LEAF -> " as the leaf of rack " + hierarchy.rack() + " (ranks " +
                hierarchy.rackFirst(hierarchy.rack()) + ".." + hierarchy.rackLast(hierarchy.rack()) + ")";
            case SPINE -> " as the spine of " + hierarchy.racks() + " racks (rack ends " + hierarchy.rackEnds() + ")";
        };
    }

    /**
     * @return the rings installed on the dataplane, as sent (for tests and the CTT view).
     */
    java.util.Collection<RingDefinition> installedRings()
    {
        return List.copyOf(installedRings.values());
    }

    /**
     * Translate a validated flat ring of the configuration into the dataplane's install command.
     */
    static RingDefinition toDataplane(final RingRef ref)
    {
        return toDataplane(ref, null);
    }

    /**
     * Translate a validated ring of the configuration into the dataplane's install command, with this appliance's
     * place in it: the same ring (all W members, same RingID) for every appliance of a multi-rack job, the
     * hierarchy picked by the appliance's name.
     *
     * @throws IllegalArgumentException if the appliance has no role in the ring (the configured appliance
     *                                  leaves such rings out, so this is a bug, not a configuration error).
     */
    static RingDefinition toDataplane(final RingRef ref, final String applianceName)
    {
        final Hierarchy hierarchy = ref.ring().hierarchyFor(applianceName).orElseThrow(() ->
            new IllegalArgumentException("ring " + ref.ring().id() + " of job " + ref.job() + ": appliance " +
                applianceName + " is neither its spine nor one of its leaves"));
        return flatDefinition(ref).withHierarchy(hierarchy);
    }

    private static RingDefinition flatDefinition(final RingRef ref)
    {
        final RingConfig ring = ref.ring();
        final List<RingMember> members = new ArrayList<>();
        for (final MemberConfig member : ring.members())
        {
            members.add(new RingMember(
                member.rank(),
                InetAddress.ofLiteral(member.ip()),
                member.qpn() == null ? RingMember.ANY : member.qpn(),
                member.mac() == null ? RingMember.ANY_MAC : EthernetHeader.parseMac(member.mac())));
        }
        return new RingDefinition(ring.id(), ref.job(), ring.elementType(), ring.window(),
            ring.msgLen(), ring.payloadSize(), members, ring.inetTagValue(), ring.resultTagValue());
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
        LOG.info("dataplane warmed up in {} ms", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNs));
    }

    private DataplaneProxy proxy()
    {
        if (proxy == null)
        {
            throw new IllegalStateException("dataplane not started");
        }
        return proxy;
    }

    private static <T> T await(final CompletableFuture<T> reply, final String what)
    {
        try
        {
            return reply.get(COMMAND_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        }
        catch (final ExecutionException ex)
        {
            final Throwable cause = ex.getCause();
            if (cause instanceof IllegalArgumentException refusal)
            {
                throw new IllegalArgumentException(what + ": " + refusal.getMessage(), refusal);
            }
            throw new IllegalStateException(what + ": " + cause.getMessage(), cause);
        }
        catch (final TimeoutException ex)
        {
            throw new IllegalStateException(what + ": the dataplane did not answer within " + COMMAND_TIMEOUT_MS +
                " ms", ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(what + ": interrupted", ex);
        }
    }

    @Override
    public MetricsSource metrics()
    {
        return this::collect;
    }

    private void collect(final MetricsSink sink)
    {
        if (proxy == null)
        {
            return;
        }
        // One catalogue of counters for both /metrics and the API: the same names in both places.
        for (final CounterSample sample : counterSamples())
        {
            final CounterValue counter = sample.counter();
            final String[] labels = new String[2 * counter.labels().size()];
            int i = 0;
            for (final Map.Entry<String, String> label : counter.labels().entrySet())
            {
                labels[i++] = label.getKey();
                labels[i++] = label.getValue();
            }
            sink.counter(counter.metric(), sample.help(), counter.value(), labels);
        }
        final Histogram latency = proxy.latency();
        final long[] buckets = new long[LATENCY_BOUNDS_SECONDS.length];
        for (final var value : latency.recordedValues())
        {
            final double seconds = value.getValueIteratedTo() / 1e9;
            int bucket = 0;
            while (seconds > LATENCY_BOUNDS_SECONDS[bucket])
            {
                bucket++;
            }
            buckets[bucket] += value.getCountAtValueIteratedTo();
        }
        final double sum = latency.getMean() * latency.getTotalCount() / 1e9;
        sink.histogram("netreduce_aggregation_latency_seconds",
            "Time from an aggregator's first packet in to its results out.", LATENCY_BOUNDS_SECONDS, buckets, sum);
        collectCtt(sink);
    }

    /**
     * The CTT as the control plane sees it: the multi-rack rings installed, their entries from the topology, and
     * what the CLT has learned of each entry's connection (current ring and DOWN entries only: a stale entry is a
     * connection that was replaced, a foreign one is no ring's).
     */
    private List<CttEntry> cttEntries(final List<RingStatus> rings)
    {
        final List<RingStatus> multiRack = rings.stream().filter(status -> status.ring().isMultiRack()).toList();
        if (multiRack.isEmpty())
        {
            return List.of();
        }
        final List<CltEntry> learned = new ArrayList<>();
        for (final ConnectionEntry entry : await(proxy().connections(), "CLT snapshot"))
        {
            if (!entry.foreign() && entry.current())
            {
                learned.add(new CltEntry(entry.source().getHostAddress(), entry.destination().getHostAddress(),
                    entry.destQp(), entry.ringId(), entry.rank(), entry.msgId(), entry.psn0()));
            }
        }
        return CttEntry.of(multiRack, applianceName, learned);
    }

    /**
     * CTT entries per ring and role, and how many of them the CLT has learned, for the rings this appliance serves
     * in a hierarchy. Only taken when such a ring is installed, so a flat appliance's scrape costs no snapshot.
     */
    private void collectCtt(final MetricsSink sink)
    {
        if (installedRings.values().stream().allMatch(ring -> ring.hierarchy().tier() == Hierarchy.Tier.FLAT) ||
            configured == null)
        {
            return;
        }
        final List<CttEntry> entries;
        try
        {
            entries = cttEntries(configured.rings());
        }
        catch (final RuntimeException ex)
        {
            // A dataplane too busy to answer the snapshot in time must not fail the whole scrape.
            LOG.warn("CTT metrics skipped this scrape: {}", ex.getMessage());
            return;
        }
        final Map<List<String>, long[]> counts = new LinkedHashMap<>();
        for (final CttEntry entry : entries)
        {
            final long[] count = counts.computeIfAbsent(
                List.of(entry.job(), Integer.toString(entry.ringId()), entry.tier(), entry.role()), key -> new long[2]);
            count[0]++;
            count[1] += entry.learned() ? 1 : 0;
        }
        for (final Map.Entry<List<String>, long[]> count : counts.entrySet())
        {
            final List<String> key = count.getKey();
            final String[] labels = { "job", key.get(0), "ring", key.get(1), "tier", key.get(2), "role", key.get(3) };
            sink.gauge("netreduce_ctt_entries", "Connection translation table entries of the multi-rack rings.",
                count.getValue()[0], labels);
            sink.gauge("netreduce_ctt_entries_learned",
                "CTT entries whose connection the CLT has learned (QPN and PSN known).", count.getValue()[1], labels);
        }
    }

    /**
     * A counter and the help line of its Prometheus metric (one per metric name, shared by its series).
     */
    private record CounterSample(CounterValue counter, String help)
    {
    }

    /**
     * Every counter of the dataplane, its rings and its ports, named as exported: dataplane counters as
     * {@code netreduce_dataplane_<what>} (drops as {@code netreduce_dataplane_drops{reason}}), per-ring counters as
     * {@code netreduce_ring_<kind>{job,ring}}, port counters as {@code netreduce_port_<name>{port}}.
     */
    private List<CounterSample> counterSamples()
    {
        final List<CounterSample> samples = new ArrayList<>();
        for (final DataplaneCounter counter : DataplaneCounter.values())
        {
            final long value = proxy.counter(counter);
            if (counter.isDrop())
            {
                samples.add(new CounterSample(new CounterValue("netreduce_dataplane_drops",
                    Map.of("reason", counter.reason()), counter.label(), value),
                    "Frames the dataplane dropped, by reason."));
            }
            else
            {
                samples.add(new CounterSample(new CounterValue("netreduce_dataplane_" + counter.reason(), Map.of(),
                    counter.label(), value), capitalise(counter.label()) + "."));
            }
        }
        // A ring's counters live in its lane's buffers: every lane's are read.
        for (final DataplaneCounters counters : proxy.laneCounters())
        {
            counters.reader().forEach((counterId, typeId, keyBuffer, label) ->
            {
                if (typeId == DataplaneCounters.RING_COUNTER_TYPE_ID)
                {
                    final int ringId = keyBuffer.getInt(RingCounter.RING_ID_KEY_OFFSET);
                    final RingCounter kind = RingCounter.of(keyBuffer.getInt(RingCounter.KIND_KEY_OFFSET));
                    samples.add(new CounterSample(new CounterValue("netreduce_ring_" + kind.key(),
                        Map.of("job", ringJobs.getOrDefault(ringId, ""), "ring", Integer.toString(ringId)),
                        "ring " + ringId + " " + kind.what(), counters.reader().getCounterValue(counterId)),
                        "Per ring: " + kind.what() + "."));
                }
            });
        }
        // With lanes a port is one socket per lane, each with its counters: one series per lane (label lane), so an
        // operator sees how the kernel spread the traffic; sum by port for the port's total.
        final boolean perLane = lanePorts.size() > 1;
        for (int lane = 0; lane < lanePorts.size(); lane++)
        {
            for (final PacketPort port : lanePorts.get(lane))
            {
                final Map<String, String> labels = perLane ?
                    Map.of("port", port.name(), "lane", Integer.toString(lane)) : Map.of("port", port.name());
                final String what = "port " + port.name() + (perLane ? " lane " + lane : "");
                for (int id = 0; id < PortCounters.COUNTER_COUNT; id++)
                {
                    samples.add(new CounterSample(new CounterValue("netreduce_port_" + PortCounters.name(id),
                        labels, what + " " + PortCounters.name(id), port.counters().get(id)),
                        "Port counter " + PortCounters.name(id) + (perLane ? ", per lane socket." : ".")));
                }
            }
        }
        return samples;
    }

    /**
     * Each port's (each lane socket's) own losses, for the drop watcher: the kernel found the receive ring full,
     * a frame was longer than a receive slot, an offload frame could not be split.
     */
    private List<DropBurstWatcher.PortDrop> portDrops()
    {
        final List<DropBurstWatcher.PortDrop> drops = new ArrayList<>();
        final boolean perLane = lanePorts.size() > 1;
        for (int lane = 0; lane < lanePorts.size(); lane++)
        {
            for (final PacketPort port : lanePorts.get(lane))
            {
                final String where = port.name() + (perLane ? " lane " + lane : "");
                final PortCounters counters = port.counters();
                drops.add(portDrop(where, counters, PortCounters.RX_DROPPED, "receive ring full"));
                drops.add(portDrop(where, counters, PortCounters.RX_TRUNCATED, "frame longer than a receive slot"));
                drops.add(portDrop(where, counters, PortCounters.RX_GSO_UNSUPPORTED, "offload frame not split"));
            }
        }
        return drops;
    }

    private static DropBurstWatcher.PortDrop portDrop(
        final String where, final PortCounters counters, final int id, final String meaning)
    {
        return new DropBurstWatcher.PortDrop(where + " " + PortCounters.name(id) + " (" + meaning + ")",
            () -> counters.get(id));
    }

    private static String capitalise(final String text)
    {
        return text.isEmpty() ? text : Character.toUpperCase(text.charAt(0)) + text.substring(1);
    }

    @Override
    public ApplianceControl control(final ConfiguredAppliance configured)
    {
        this.configured = configured;
        return new Control(configured);
    }

    @Override
    public void close()
    {
        if (captures != null)
        {
            // While the dataplane still runs: each capture's tap is removed and its file closed complete.
            captures.close();
            dropWatcher.close();
            tagReporter.close();
        }
        // Stops each lane's duty cycle after the batch in hand and closes its agent (tables, aggregator memory).
        runners.forEach(AgentRunner::close);
        runners.clear();
        pollers.forEach(PortPoller::close);
        pollers.clear();
        closePorts();
        LOG.info("dataplane stopped");
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

    /**
     * The API's view: configuration operations go to the configured appliance (which sends ring changes through
     * {@link #installer()}), table and counter queries to the dataplane.
     */
    private final class Control implements ApplianceControl
    {
        private final ConfiguredAppliance configured;

        Control(final ConfiguredAppliance configured)
        {
            this.configured = configured;
        }

        @Override
        public List<JobConfig> listJobs()
        {
            return configured.listJobs();
        }

        @Override
        public Optional<JobConfig> job(final String name)
        {
            return configured.job(name);
        }

        @Override
        public JobConfig addJob(final JobConfig job)
            throws ConfigException
        {
            return configured.addJob(job);
        }

        @Override
        public JobConfig removeJob(final String name)
        {
            return configured.removeJob(name);
        }

        @Override
        public List<RingStatus> rings()
        {
            return configured.rings().stream().map(this::withLane).toList();
        }

        private RingStatus withLane(final RingStatus status)
        {
            return proxy == null ? status : status.onLane(proxy.laneOf(status.ring().id()));
        }

        @Override
        public Optional<RingStatus> ring(final int ringId)
        {
            return configured.ring(ringId).map(this::withLane);
        }

        @Override
        public RingOccupancy occupancy(final int ringId)
        {
            final int worldSize = configured.ring(ringId)
                .orElseThrow(() -> new NotFoundException("no ring " + ringId)).worldSize();
            final AggregatorUsage snapshot =
                await(proxy().occupancy(ringId, OCCUPANCY_LIMIT), "occupancy of ring " + ringId);
            final List<RingOccupancy.AggregatorOccupancy> incomplete = new ArrayList<>();
            for (final PendingAggregator pending : snapshot.oldest())
            {
                final List<Integer> arrived = new ArrayList<>();
                for (int rank = 0; rank < worldSize; rank++)
                {
                    if (!pending.missingRanks().contains(rank))
                    {
                        arrived.add(rank);
                    }
                }
                incomplete.add(new RingOccupancy.AggregatorOccupancy(
                    pending.msgId(), pending.position(), arrived, pending.missingRanks(), pending.ageNanos()));
            }
            return new RingOccupancy(ringId, worldSize, incomplete);
        }

        @Override
        public List<CltEntry> clt()
        {
            final List<CltEntry> entries = new ArrayList<>();
            for (final ConnectionEntry entry : await(proxy().connections(), "CLT snapshot"))
            {
                entries.add(new CltEntry(entry.source().getHostAddress(), entry.destination().getHostAddress(),
                    entry.destQp(), entry.foreign() ? -1 : entry.ringId(), entry.foreign() ? -1 : entry.rank(),
                    entry.msgId(), entry.psn0()));
            }
            return entries;
        }

        @Override
        public List<CttEntry> ctt()
        {
            return cttEntries(configured.rings());
        }

        @Override
        public List<CounterValue> counters()
        {
            proxy();
            return counterSamples().stream().map(CounterSample::counter).toList();
        }

        @Override
        public List<LatencySummary> latency()
        {
            final Histogram histogram = proxy().latency();
            return List.of(new LatencySummary("aggregation", "", -1, histogram.getTotalCount(),
                histogram.getValueAtPercentile(50), histogram.getValueAtPercentile(90),
                histogram.getValueAtPercentile(99), histogram.getValueAtPercentile(99.9), histogram.getMaxValue()));
        }

        @Override
        public ReloadResult reload() throws ConfigException
        {
            return configured.reload();
        }

        @Override
        public List<CaptureInfo> captures()
        {
            return captureManager().list();
        }

        @Override
        public CaptureInfo startCapture(final CaptureRequest request)
        {
            return captureManager().start(request);
        }

        @Override
        public CaptureInfo stopCapture(final String id)
        {
            return captureManager().stop(id);
        }

        private CaptureManager captureManager()
        {
            if (captures == null)
            {
                throw new IllegalStateException("dataplane not started");
            }
            return captures;
        }
    }
}
