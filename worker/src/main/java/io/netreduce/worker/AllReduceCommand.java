package io.netreduce.worker;

import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.InterfaceMtu;
import io.netreduce.protocol.port.ThreadNice;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.host.allreduce.AllReduce;
import io.netreduce.host.allreduce.MultiTreeAllReduce;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.CongestionControl;
import io.netreduce.host.allreduce.NetReduceConfig;
import io.netreduce.host.allreduce.ParallelAllReduce;
import io.netreduce.host.allreduce.RingAllReduce;
import io.netreduce.host.allreduce.RingWarmUp;
import io.netreduce.host.allreduce.RingLink;
import io.netreduce.host.rc.Bootstrap;
import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import org.agrona.concurrent.SystemNanoClock;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.YieldingIdleStrategy;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;

import java.io.IOException;
import java.io.PrintStream;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

/**
 * {@code netreduce worker allreduce}: one rank of a ring all-reducing a generated tensor, by NetReduce through the
 * appliance or by the ring algorithm, and checking every result against the exact expected sum; or, with
 * {@code --protocol switchml}, one worker of a SwitchML job on the appliance ({@link SwitchMlRun}).
 * <p>
 * Connection set-up: rank r listens on TCP port {@code --port + r} for its predecessor and connects to its
 * successor's port; over those connections the ranks exchange queue pair numbers, PSNs, addresses, MACs and the
 * receive region (VA, R_Key, length), then wait until both neighbours are connected ({@link RingNeighbours}). At
 * the end each rank tells both neighbours it is done and keeps its endpoint running (answering retransmissions)
 * until they are too.
 * <p>
 * This class checks how the options ({@link AllReduceOptions}) go together and wires the port, endpoint and rings;
 * {@link AllReduceRun} makes the calls.
 */
@Command(
    name = "allreduce",
    mixinStandardHelpOptions = true,
    description = "One rank of a NetReduce (or ring, or SwitchML) all-reduce; checks results against the exact sum.")
public final class AllReduceCommand implements Callable<Integer>
{
    @Mixin
    private final AllReduceOptions options = new AllReduceOptions();

    private final PrintStream out = System.out;

    /** Where the work between calls runs; its thread keeps the process's nice value. */
    private final OffEndpointThread checker = new OffEndpointThread();

    private int tag(final String option, final String text)
    {
        try
        {
            return InaHeader.tagValue(text);
        }
        catch (final IllegalArgumentException ex)
        {
            throw new CommandLine.ParameterException(new CommandLine(this), option + " " + ex.getMessage());
        }
    }

    private IdleStrategy idleStrategy(final RcEndpoint endpoint)
    {
        return switch (options.idleMode)
        {
            case "poll" -> endpoint.idleStrategy();
            case "yield" -> new YieldingIdleStrategy();
            default -> throw new CommandLine.ParameterException(new CommandLine(this),
                "--idle must be poll or yield: " + options.idleMode);
        };
    }

    @Override
    public Integer call() throws Exception
    {
        final int rank = options.rank;
        final int world = options.world;
        final ElementType elementType;
        final boolean netreduce;
        final int[] rackFirst;
        final SwitchMlSettings switchMl;
        try
        {
            elementType = ElementType.parse(options.type);
            netreduce = switch (options.mode)
            {
                case "netreduce" -> true;
                case "ring" -> false;
                default -> throw new IllegalArgumentException("--mode must be netreduce or ring: " + options.mode);
            };
            final boolean switchMlProtocol = switch (options.protocol)
            {
                case "netreduce" -> false;
                case "switchml" -> true;
                default -> throw new IllegalArgumentException("--protocol must be netreduce or switchml: " +
                    options.protocol);
            };
            if (world < 2 || rank < 0 || rank >= world)
            {
                throw new IllegalArgumentException("need --world >= 2 and 0 <= --rank < --world");
            }
            if (options.size <= 0 || options.size % elementType.size() != 0)
            {
                throw new IllegalArgumentException("--size must be a positive multiple of the element size");
            }
            switchMl = switchMlProtocol ? SwitchMlSettings.of(options, elementType) : null;
            rackFirst = options.racks == null ? null : AllReduceOptions.parseRacks(options.racks, world);
            if (options.localWorkers < 1 || options.localWorkers > 16)
            {
                throw new IllegalArgumentException("--local-workers must be 1..16");
            }
            if (options.localWorkers > 1 && (!netreduce || rackFirst != null || options.traceFile != null))
            {
                throw new IllegalArgumentException("--local-workers applies to --mode netreduce without --racks " +
                    "or --trace");
            }
            if (options.size / elementType.size() < options.localWorkers)
            {
                throw new IllegalArgumentException("--size is too small to split across " + options.localWorkers +
                    " local workers");
            }
            if (options.trees < 1 || options.trees > MultiTreeAllReduce.MAX_TREES)
            {
                throw new IllegalArgumentException("--trees must be 1.." + MultiTreeAllReduce.MAX_TREES);
            }
            if (options.trees > 1 && (!netreduce || rackFirst != null || options.localWorkers > 1 ||
                switchMlProtocol))
            {
                throw new IllegalArgumentException("--trees applies to --mode netreduce without --racks, " +
                    "--local-workers or --protocol switchml");
            }
            if (rackFirst != null && !netreduce)
            {
                throw new IllegalArgumentException("--racks applies to --mode netreduce only");
            }
        }
        catch (final IllegalArgumentException ex)
        {
            System.err.println("allreduce: " + ex.getMessage());
            return 2;
        }
        if (switchMl != null)
        {
            return new SwitchMlRun(options, switchMl, elementType, out, checker).run();
        }
        final int payloadSize = options.payload != null ? options.payload : options.pmtu;
        final long timeoutNs = TimeUnit.SECONDS.toNanos(options.timeoutSeconds);
        final RcConfig rc;
        final NetReduceConfig nr;
        try
        {
            rc = new RcConfig()
                .pmtu(options.pmtu)
                .retransmitTimeoutNs(options.rtoMicros * 1000)
                .sendDropProbability(options.drop)
                .firstQpn(options.firstQpn)
                .faultSeed(options.seed * 1_000_003L + rank);
            nr = new NetReduceConfig(options.ringId, options.window, options.msgLen, payloadSize, timeoutNs,
                tag("--inet-tag", options.inetTag), tag("--result-tag", options.resultTag),
                congestionControl(options));
            ThreadNice.validate(options.endpointNice);
            if (netreduce && payloadSize != options.pmtu)
            {
                throw new IllegalArgumentException("--payload must equal --pmtu for netreduce (each packet carries " +
                    "exactly the payload size)");
            }
        }
        catch (final IllegalArgumentException ex)
        {
            System.err.println("allreduce: " + ex.getMessage());
            return 2;
        }
        final List<String> hosts = PeerHosts.resolve(options.peers, world);
        final int sendBytes = netreduce ? nr.regionBytes() : RingAllReduce.sendRegionBytes(options.size, world);
        final int receiveBytes = netreduce ? nr.regionBytes() : RingAllReduce.receiveRegionBytes(options.size, world);
        final AfPacketConfiguration portConfig = AfPacketConfiguration.defaults(options.dev)
            .withTxRing(8192, 1024)
            .withRxRing(16384, 1024, AfPacketConfiguration.DEFAULT_RX_BLOCK_TIMEOUT_MS)
            .withSegmentationOffload(options.segmentationOffload)
            .withTxSocketBuffer(transmitSocketBuffer(rc, Math.max(options.localWorkers, options.trees)))
            .withRoceOnly(true);
        if (netreduce && options.warmUpFrames > 0)
        {
            // Before the port opens and the neighbours connect: nothing of the ring waits on it but the bootstrap.
            final RingWarmUp.Report onPorts = AllReduceOptions.WARM_UP_IN_MEMORY.equals(options.warmUpDev) ? null :
                LoopbackWarmUp.run(portConfig.withInterfaceName(options.warmUpDev), rc, options.window,
                    options.msgLen, elementType, 0, options.warmUpFrames, RingWarmUp.DEFAULT_MAX_NANOS,
                    "allreduce: rank " + rank, System.err);
            if (onPorts == null || onPorts.failure() != null)
            {
                final RingWarmUp.Report warmUp = RingWarmUp.runOnce(rc, options.window, options.msgLen, elementType,
                    0, options.warmUpFrames);
                System.err.println("allreduce: rank " + rank + " warm-up in memory: " + warmUp);
            }
        }
        try (AfPacketPort packetPort = AfPacketPort.open(portConfig))
        {
            final InetAddress localIp =
                options.ip != null ? InetAddress.getByName(options.ip) : interfaceAddress(options.dev);
            final long localMac = ConnectionInfo.macFromBytes(packetPort.macAddress());
            ServeCommand.noteOffload("allreduce", packetPort, portConfig.segmentationOffload());
            final RcEndpoint endpoint = new RcEndpoint(packetPort, rc, SystemNanoClock.INSTANCE, localIp, localMac);
            // This thread drives the endpoint; the JSON summary says at which nice value, if the kernel allowed it.
            final boolean endpointNiceApplied = EndpointNice.apply(options.endpointNice, "allreduce", System.err);
            // Local workers' rings, or the job's trees: ring i (RingID + i) on its own link.
            final int n = Math.max(options.localWorkers, options.trees);
            final RingLink[] links = new RingLink[n];
            for (int i = 0; i < n; i++)
            {
                links[i] = new RingLink(endpoint, SystemNanoClock.INSTANCE, rank, world, sendBytes, receiveBytes);
                if (options.trees > 1)
                {
                    links[i].udpSourcePort(MultiTreeAllReduce.udpSourcePort(i));
                }
            }
            final Duration setupTimeout = Duration.ofSeconds(Math.max(options.timeoutSeconds, 30));
            final List<Bootstrap> channels = new ArrayList<>();
            try
            {
                final List<RingNeighbours> rings = new ArrayList<>();
                for (int i = 0; i < n; i++)
                {
                    // Ring i's bootstrap ports: PORT + i*W + rank.
                    rings.add(RingNeighbours.connect(links[i], hosts, options.port + i * world, rank, world,
                        options.timeoutSeconds, setupTimeout, channels));
                }

                final AllReduceRun run = new AllReduceRun(options, out, checker, this::idleStrategy, elementType);
                final int exitCode;
                if (options.trees > 1)
                {
                    final NetReduceAllReduce[] trees = new NetReduceAllReduce[n];
                    for (int t = 0; t < n; t++)
                    {
                        trees[t] = new NetReduceAllReduce(links[t], new NetReduceConfig(options.ringId + t,
                            options.window, options.msgLen, payloadSize, timeoutNs, tag("--inet-tag", options.inetTag),
                            tag("--result-tag", options.resultTag), nr.congestion()));
                    }
                    exitCode = run.run(new MultiTreeAllReduce(trees), true, null, options.size, rings.getFirst(),
                        endpointNiceApplied);
                }
                else if (n == 1)
                {
                    final AllReduce op = netreduce ? new NetReduceAllReduce(links[0], nr) :
                        new RingAllReduce(links[0], options.segment, timeoutNs);
                    exitCode = run.run(op, netreduce, rackFirst, options.size, rings.getFirst(), endpointNiceApplied);
                }
                else
                {
                    final AllReduce[] ops = new AllReduce[n];
                    for (int i = 0; i < n; i++)
                    {
                        ops[i] = new NetReduceAllReduce(links[i], new NetReduceConfig(options.ringId + i,
                            options.window, options.msgLen, payloadSize, timeoutNs, tag("--inet-tag", options.inetTag),
                            tag("--result-tag", options.resultTag), nr.congestion()));
                    }
                    exitCode = run.runParallel(new ParallelAllReduce(ops), endpoint, options.size);
                }
                for (final RingNeighbours ring : rings)
                {
                    ring.finish(endpoint, () -> idleStrategy(endpoint));
                }
                return exitCode;
            }
            finally
            {
                for (final Bootstrap channel : channels)
                {
                    channel.close();
                }
            }
        }
    }

    /**
     * @throws IllegalArgumentException for a gain outside (0, 1] or a minimum window below 1, naming the option.
     */
    static CongestionControl congestionControl(final AllReduceOptions options)
    {
        if (!(options.ecnGain > 0 && options.ecnGain <= 1))
        {
            throw new IllegalArgumentException("--ecn-gain must be in (0, 1]: " + options.ecnGain);
        }
        if (options.ecnMinWindow < 1)
        {
            throw new IllegalArgumentException("--ecn-min-window must be at least 1: " + options.ecnMinWindow);
        }
        return new CongestionControl(options.ecnWindow, options.ecnGain, options.ecnMinWindow);
    }

    /**
     * @return the transmit socket buffer for an endpoint whose {@code sendingQps} queue pairs each keep up to
     *         {@link RcConfig#windowBytes()} in flight: the kernel then takes every frame the windows let out at
     *         the first kick, and the endpoint blocks in poll(2) until answers come. With the kernel's default
     *         (208 KiB) a shaped link's queue filled it: measured on the bed (W = 4, tbf 1 Gbit/s, a busy process
     *         beside each rank), 2,472 of 3,708 kicks in 4 s failed, and the endpoint, which does not block while
     *         frames wait in its ring, spun, yielded and kicked again until the link drained (docs/performance.md,
     *         "The endpoint's CPU per call").
     */
    static int transmitSocketBuffer(final RcConfig rc, final int sendingQps)
    {
        return (int)Math.min(rc.windowBytes() * Math.max(1, sendingQps), 1 << 30);
    }

    /**
     * @return the first IPv4 address of {@code dev} in this network namespace: a worker's default ring address.
     * @throws IllegalArgumentException if there is no such interface or it has no IPv4 address.
     */
    static InetAddress interfaceAddress(final String dev) throws IOException
    {
        final NetworkInterface nif = addressedInterface(dev);
        for (final InetAddress address : nif.inetAddresses().toList())
        {
            if (address instanceof Inet4Address)
            {
                return address;
            }
        }
        throw new IllegalArgumentException(dev + " has no IPv4 address; pass --ip");
    }

    /**
     * @return {@code dev} in this network namespace, as the JDK lists it: only with an address.
     * @throws IllegalArgumentException if there is no such interface, or it is here without any address.
     */
    static NetworkInterface addressedInterface(final String dev) throws SocketException
    {
        final NetworkInterface nif = NetworkInterface.getByName(dev);
        if (nif == null)
        {
            // The JDK lists only interfaces with an address: one that is here without any is told as such.
            throw new IllegalArgumentException(InterfaceMtu.of(dev).isPresent() ?
                dev + " has no IP address; pass --ip" : "no interface " + dev + " in this network namespace");
        }
        return nif;
    }
}
