package io.netreduce.daemon;

import io.netreduce.controlplane.config.ListenAddress;
import io.netreduce.controlplane.config.SwitchMlApplianceConfig;
import io.netreduce.switchml.controller.SwitchMlController;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;

import io.netreduce.controlplane.api.ApplianceControl;
import io.netreduce.controlplane.api.ConfiguredAppliance;
import io.netreduce.controlplane.api.RingInstaller;
import io.netreduce.controlplane.config.DataplaneConfig;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.PortConfig;
import io.netreduce.controlplane.config.RingRef;
import io.netreduce.controlplane.metrics.MetricsSource;
import io.netreduce.daemon.capture.CaptureManager;
import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneLanes;
import io.netreduce.dataplane.agent.DataplaneProxy;
import io.netreduce.dataplane.capture.CaptureTap;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.PacketPort;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Path;
import java.util.Collection;
import java.util.List;
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
 * <p>
 * This class puts the parts together: {@link DataplanePorts} and {@link LaneRunners} the wiring,
 * {@link DataplaneRingInstaller} the ring commands, {@link DataplaneControl} the API's control,
 * {@link DataplaneViews} and {@link DataplaneMetrics} what the dataplane reports.
 */
public final class PacketDataplane implements DataplaneAttachment
{
    /** How long the control thread waits for the dataplane to apply a command. */
    public static final long COMMAND_TIMEOUT_MS = 5_000;

    /**
     * Longest wait for the agent's warm-up at start: a few hundred ms on an idle core, about a minute in a VM under
     * QEMU's TCG emulation (the Vector API kernels' warm-up), more when its host is busy. The JVM property
     * {@code netreduce.startTimeoutMs} changes it (the interop harness's systemd VM sets it in a drop-in).
     */
    public static final long START_TIMEOUT_MS = Long.getLong("netreduce.startTimeoutMs", 120_000L);
    /** Process exit status when the dataplane thread fails with an {@link Error}. */
    public static final int EXIT_DATAPLANE_FAILED = 70;
    /** How many of a ring's oldest incomplete aggregators the occupancy view lists. */
    public static final int OCCUPANCY_LIMIT = 16;

    private static final Logger LOG = LoggerFactory.getLogger(PacketDataplane.class);

    private final LaneRunners lanes;
    private final DataplaneRingInstaller rings;
    private final DataplaneSwitchMl switchMl;
    private final DataplaneViews tables;
    private final DataplaneMetrics metrics;
    private CaptureManager captures;
    private SwitchMlController switchMlController;
    private DropBurstWatcher dropWatcher;
    private ForeignTagReporter tagReporter;

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
        this(portOpener, lanePortOpener, ports -> null);
    }

    /**
     * @param warmUpPortSettings from the configured ports, the settings of the port the packet path's warm-up opens
     *                           on the loopback interface (null: the warm-up runs in memory).
     */
    private PacketDataplane(
        final Function<PortConfig, PacketPort> portOpener,
        final BiFunction<PortConfig, Integer, List<PacketPort>> lanePortOpener,
        final Function<List<PortConfig>, AfPacketConfiguration> warmUpPortSettings)
    {
        lanes = new LaneRunners(portOpener, lanePortOpener, warmUpPortSettings);
        switchMl = new DataplaneSwitchMl(lanes);
        rings = new DataplaneRingInstaller(lanes, switchMl);
        tables = new DataplaneViews(lanes, rings);
        metrics = new DataplaneMetrics(lanes, rings, tables, switchMl);
    }

    /**
     * @return a dataplane on AF_PACKET ports with default ring sizes (jumbo transmit slots when the MTU needs them).
     */
    public static PacketDataplane onAfPacketPorts()
    {
        return new PacketDataplane(PacketDataplane::openPort, PacketDataplane::openLanePorts,
            DataplanePorts::warmUpPortSettings);
    }

    /**
     * Open one configured port once per lane, as {@link #openPort} would, the sockets in one fanout group.
     */
    public static List<PacketPort> openLanePorts(final PortConfig port, final int lanes)
    {
        return DataplanePorts.openLanePorts(port, lanes);
    }

    /**
     * Open one configured port as the daemon does: AF_PACKET with default ring sizes, jumbo transmit slots when the
     * MTU needs them, or AF_XDP when the port's type says so. Public so that a harness can open the port inside
     * another network namespace ({@code NetworkNamespace.callIn}) and still get the daemon's exact port set-up.
     */
    public static PacketPort openPort(final PortConfig port)
    {
        return DataplanePorts.openPort(port);
    }

    @Override
    public void start(final NetreduceConfig config)
    {
        final DataplaneConfig settings = config.appliance().dataplane();
        rings.applianceName(config.appliance().name());
        switchMl.configure(config.appliance().switchml());
        lanes.start(config);
        final DataplaneProxy proxy = lanes.proxy();
        final List<PacketPort> portsOfLane0 = lanes.lanePorts().getFirst();
        captures = new CaptureManager(proxy, portsOfLane0.stream().map(PacketPort::name).toList(),
            Path.of(config.appliance().captureDirectory()), CaptureTap.DEFAULT_RING_CAPACITY, COMMAND_TIMEOUT_MS);
        dropWatcher = DropBurstWatcher.start(proxy::counter, metrics.portDrops());
        tagReporter = ForeignTagReporter.start(proxy, rings::installed);
        startSwitchMlController(config.appliance().switchml());
        LOG.info("dataplane started: {} port(s) {} ({}), {} lane(s) at nice {}, batch {}, idle {}{}",
            portsOfLane0.size(), portsOfLane0.stream().map(PacketPort::name).toList(),
            portsOfLane0.size() == 2 ? "bump in the wire" : "one-armed", settings.lanes(), settings.laneNice(),
            settings.batchSize(), settings.idleStrategy().configName(),
            settings.dropProbability() > 0 ? ", FAULT INJECTION drop probability " + settings.dropProbability() : "");
    }

    /**
     * Serve the SwitchML controller's gRPC service where the configuration says, so the published client can open
     * sessions; refusing to start when the address cannot be bound, as the API does.
     */
    private void startSwitchMlController(final SwitchMlApplianceConfig switchml)
    {
        if (switchml == null || switchml.controller() == null)
        {
            return;
        }
        final ListenAddress listen = ListenAddress.parse(switchml.controller());
        try
        {
            switchMlController = SwitchMlController.start(new InetSocketAddress(listen.host(), listen.port()),
                new SwitchMlSessions(switchMl, switchml));
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("appliance.switchml.controller.listen " + switchml.controller() +
                ": cannot listen: " + ex.getMessage(), ex);
        }
        LOG.info("SwitchML controller listening on {} (sessions from {})", switchMlController.address(),
            switchml.allow());
    }

    /**
     * @return the SwitchML controller's bound address, or null if it does not run.
     */
    public InetSocketAddress switchMlControllerAddress()
    {
        return switchMlController == null ? null : switchMlController.address();
    }

    @Override
    public RingInstaller installer()
    {
        return rings;
    }

    /**
     * @return the rings installed on the dataplane, as sent (for tests and the CTT view).
     */
    Collection<RingDefinition> installedRings()
    {
        return List.copyOf(rings.installed());
    }

    /**
     * Translate a validated flat ring of the configuration into the dataplane's install command.
     */
    static RingDefinition toDataplane(final RingRef ref)
    {
        return DataplaneRingInstaller.toDataplane(ref, null);
    }

    /**
     * @see DataplaneRingInstaller#toDataplane(RingRef, String)
     */
    static RingDefinition toDataplane(final RingRef ref, final String applianceName)
    {
        return DataplaneRingInstaller.toDataplane(ref, applianceName);
    }

    @Override
    public MetricsSource metrics()
    {
        return metrics::collect;
    }

    @Override
    public ApplianceControl control(final ConfiguredAppliance configured)
    {
        metrics.configured(configured);
        return new DataplaneControl(configured, lanes, tables, metrics, () -> captures, switchMl);
    }

    @Override
    public void close()
    {
        if (switchMlController != null)
        {
            switchMlController.close();
        }
        if (captures != null)
        {
            // While the dataplane still runs: each capture's tap is removed and its file closed complete.
            captures.close();
            dropWatcher.close();
            tagReporter.close();
        }
        // Stops each lane's duty cycle after the batch in hand and closes its agent (tables, aggregator memory).
        lanes.close();
        LOG.info("dataplane stopped");
    }
}
