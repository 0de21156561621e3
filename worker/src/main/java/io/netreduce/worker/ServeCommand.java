package io.netreduce.worker;

import io.netreduce.host.allreduce.RingWarmUp;
import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.KernelRelease;
import io.netreduce.protocol.port.Doorbell;
import io.netreduce.protocol.port.ThreadNice;
import io.netreduce.protocol.writer.SwitchMlPacketWriter;
import io.netreduce.worker.sidecar.SidecarRunner;
import io.netreduce.worker.sidecar.SwitchMlSidecar;
import org.agrona.concurrent.SystemNanoClock;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.concurrent.Callable;

/**
 * {@code netreduce worker serve}: the sidecar a trainer on a host without an RDMA NIC hands its gradient buckets to
 * (the Python package's {@code sidecar} transport starts it). It opens an AF_PACKET port on {@code --dev}, listens
 * on an owner-only Unix socket for its one trainer, and runs the ring the trainer opens, reading and writing the
 * buckets in the shared memory file the trainer names. With {@code --protocol switchml} (the Python package's
 * {@code switchml} transport) it is a SwitchML worker instead: it registers with the appliance's SwitchML controller
 * ({@code --controller}) when the trainer opens, and sums the trainer's buffers through the session's job.
 */
@Command(
    name = "serve",
    mixinStandardHelpOptions = true,
    description = "Sidecar for a trainer: runs a NetReduce ring over this host's software RC endpoint (or, with " +
        "--protocol switchml, a SwitchML worker), fed through shared memory and a Unix socket (see docs/python.md).")
public final class ServeCommand implements Callable<Integer>
{
    @Option(names = "--dev", required = true, description = "Interface to open an AF_PACKET port on.")
    String dev;

    @Option(names = "--ip", description = "Local address (default: the interface's first IPv4 address).")
    String ip;

    @Option(names = "--socket", required = true, description = "Unix socket path to listen on for the trainer " +
        "(created owner-only; its directory must exist and should be private).")
    Path socket;

    @Option(names = "--protocol", description = "netreduce (a ring over the software RC endpoint) or switchml (a " +
        "SwitchML worker registered with --controller; options --elements, --outstanding, --timeout-us, " +
        "--udp-port-base; --pmtu, --rto-us and --segmentation-offload do not apply) (default ${DEFAULT-VALUE}).")
    String protocol = "netreduce";

    @Option(names = "--controller", paramLabel = "HOST:PORT", description = "switchml: the appliance's SwitchML " +
        "controller; the worker registers there when the trainer opens (rank and world come with the open).")
    String controller;

    @Option(names = "--elements", description = "switchml: elements per packet, the session's: a power of two " +
        "from 32 to 2048 (default ${DEFAULT-VALUE}).")
    int elements = 256;

    @Option(names = "--outstanding", description = "switchml: packets in flight (default: 128 KiB of elements in " +
        "flight, 16 to 128 packets: 128 at 256 elements, 32 at 1024).")
    Integer outstanding;

    @Option(names = "--timeout-us", description = "switchml: microseconds a packet waits for its result before it " +
        "is sent again, doubling per retransmission up to 16 times this (default ${DEFAULT-VALUE}).")
    long timeoutMicros = 5000;

    @Option(names = "--udp-port-base", description = "switchml: rank r sends from UDP port this + r (default " +
        "${DEFAULT-VALUE}).")
    int udpPortBase = SwitchMlSettings.DEFAULT_UDP_PORT_BASE;

    @Option(names = "--pmtu", description = "Path MTU, which is the ring's payload size: 256..4096 (default " +
        "${DEFAULT-VALUE}).")
    int pmtu = 4096;

    @Option(names = "--first-qpn", description = "The first QP number this sidecar's endpoint gives out (default " +
        "${DEFAULT-VALUE}): sidecars of several trainers on one host share the interface and each sees every frame, " +
        "so each needs its own range (the Python transport passes one per process).")
    int firstQpn = 0x11;

    @Option(names = "--rto-us", description = "Initial RC retransmission timeout in microseconds (default " +
        "${DEFAULT-VALUE}; see worker allreduce --rto-us).")
    long rtoMicros = 400_000;

    @Option(names = "--segmentation-offload", negatable = true, fallbackValue = "true", description = "Send and " +
        "receive runs of packets as UDP segmentation offload frames (see worker allreduce " +
        "--segmentation-offload; default ${DEFAULT-VALUE}).")
    boolean segmentationOffload = true;

    @Option(names = "--endpoint-nice", description = EndpointNice.DESCRIPTION)
    int endpointNice = EndpointNice.DEFAULT;

    @Option(names = "--doorbell-fd", paramLabel = "FD", description = "An eventfd (non-blocking) inherited from " +
        "the trainer, which it rings for each call it posts on the call page of the shared memory (the call " +
        "doorbell: no JSON per call; docs/python.md). Needs --answer-fd. Default: none, calls come as JSON lines.")
    Integer doorbellFd;

    @Option(names = "--answer-fd", paramLabel = "FD", description = "The trainer's eventfd (non-blocking) rung after " +
        "each answer on the call page (with --doorbell-fd).")
    Integer answerFd;

    @Option(names = "--warm-up-frames", description = "Once the ring is connected and until its first call, run " +
        "the ring's per-packet path in memory (two ranks over RC on memory ports, the ring's window, MsgLen, PMTU " +
        "and element type) for this many packets, at most 5 s, so that the JIT compiles it while the trainer builds " +
        "its model rather than during its first calls; stops at the first call; 0 for none (default " +
        "${DEFAULT-VALUE}; the JVM property netreduce.sidecarWarmUpFrames sets the default).")
    long warmUpFrames = Long.getLong("netreduce.sidecarWarmUpFrames", RingWarmUp.DEFAULT_FRAMES);

    @Option(names = "--accept-timeout", description = "Seconds to wait for the trainer to connect (default " +
        "${DEFAULT-VALUE}).")
    int acceptTimeoutSeconds = 60;

    @Override
    public Integer call() throws Exception
    {
        if ("switchml".equals(protocol))
        {
            return serveSwitchMl();
        }
        if (!"netreduce".equals(protocol))
        {
            System.err.println("serve: --protocol must be netreduce or switchml: " + protocol);
            return 2;
        }
        final RcConfig rc;
        try
        {
            rc = new RcConfig().pmtu(pmtu).retransmitTimeoutNs(rtoMicros * 1000).firstQpn(firstQpn);
            ThreadNice.validate(endpointNice);
            SidecarRunner.requireSocketDirectory(socket);
        }
        catch (final IllegalArgumentException ex)
        {
            System.err.println("serve: " + ex.getMessage());
            return 2;
        }
        final AfPacketConfiguration portConfig = portConfiguration(dev, segmentationOffload, rc);
        try (AfPacketPort port = AfPacketPort.open(portConfig);
            Doorbell doorbell = requestBell();
            Doorbell answer = answerBell())
        {
            final InetAddress localIp = ip != null ? InetAddress.getByName(ip) : AllReduceCommand.interfaceAddress(dev);
            noteOffload("serve", port, segmentationOffload);
            final RcEndpoint endpoint = new RcEndpoint(port, rc, SystemNanoClock.INSTANCE, localIp,
                ConnectionInfo.macFromBytes(port.macAddress()));
            EndpointNice.apply(endpointNice, "serve", System.err); // the runner drives the endpoint on this thread
            return SidecarRunner.run(endpoint, doorbell, answer, socket, acceptTimeoutSeconds, warmUpFrames);
        }
        catch (final IllegalArgumentException ex)
        {
            System.err.println("serve: " + ex.getMessage());
            return 2;
        }
    }

    /**
     * Say on stderr when the port opened without the segmentation offload asked for (a kernel before 6.2).
     */
    static void noteOffload(final String who, final AfPacketPort port, final boolean asked)
    {
        final String note = KernelRelease.offloadNote(port.name(), asked, port.configuration().segmentationOffload());
        if (note != null)
        {
            System.err.println(who + ": " + note);
        }
    }

    /**
     * A sidecar's port ({@code worker serve}, and each session of {@code worker agent}): rings for a window of
     * 4 KiB frames both ways, and a transmit socket buffer that holds the RC window.
     */
    static AfPacketConfiguration portConfiguration(final String dev, final boolean segmentationOffload,
        final RcConfig rc)
    {
        return AfPacketConfiguration.defaults(dev)
            .withTxRing(8192, 1024)
            .withRxRing(16384, 1024, AfPacketConfiguration.DEFAULT_RX_BLOCK_TIMEOUT_MS)
            .withSegmentationOffload(segmentationOffload)
            .withTxSocketBuffer(AllReduceCommand.transmitSocketBuffer(rc, 1))
            .withRoceOnly(true);
    }

    /**
     * @return the trainer's eventfd (--doorbell-fd) or a doorbell of our own.
     * @throws IllegalArgumentException if one of --doorbell-fd and --answer-fd comes without the other, or either is
     *                                  not a non-blocking eventfd of this process.
     */
    private Doorbell requestBell()
    {
        if ((doorbellFd == null) != (answerFd == null))
        {
            throw new IllegalArgumentException("--doorbell-fd and --answer-fd go together");
        }
        return doorbellFd != null ? Doorbell.adopt(doorbellFd) : new Doorbell();
    }

    /**
     * @return the trainer's answer eventfd (--answer-fd), or null.
     */
    private Doorbell answerBell()
    {
        return answerFd != null ? Doorbell.adopt(answerFd) : null;
    }

    private int serveSwitchMl() throws IOException
    {
        final SwitchMlSidecar.Settings settings;
        try
        {
            if (controller == null)
            {
                throw new IllegalArgumentException("--protocol switchml needs --controller HOST:PORT (the " +
                    "appliance's SwitchML controller)");
            }
            SwitchMlSettings.requireController(controller, elements);
            final int flight = outstanding != null ? outstanding : SwitchMlSettings.defaultOutstanding(elements);
            SwitchMlSettings.requireFlight(flight, timeoutMicros);
            if (udpPortBase < 1 || udpPortBase > 0xFFFF)
            {
                throw new IllegalArgumentException("--udp-port-base must be 1..65535: " + udpPortBase);
            }
            ThreadNice.validate(endpointNice);
            SidecarRunner.requireSocketDirectory(socket);
            settings = new SwitchMlSidecar.Settings(elements, flight, timeoutMicros * 1_000, udpPortBase);
        }
        catch (final IllegalArgumentException ex)
        {
            System.err.println("serve: " + ex.getMessage());
            return 2;
        }
        try (AfPacketPort port = AfPacketPort.open(SwitchMlRun.portConfiguration(dev, elements));
            Doorbell doorbell = requestBell();
            Doorbell answer = answerBell())
        {
            final int frameLength = SwitchMlPacketWriter.frameLength(elements);
            if (frameLength > port.maxTxFrameLength())
            {
                System.err.println("serve: --elements " + elements + " makes frames of " + frameLength + " bytes; " +
                    dev + " (MTU " + port.mtu() + ") sends at most " + port.maxTxFrameLength());
                return 2;
            }
            final InetAddress local = ip != null ? InetAddress.getByName(ip) : AllReduceCommand.interfaceAddress(dev);
            if (!(local instanceof Inet4Address))
            {
                System.err.println("serve: SwitchML is IPv4 only; " + local.getHostAddress() + " is not IPv4");
                return 2;
            }
            final int localIp = ByteBuffer.wrap(local.getAddress()).getInt();
            final long localMac = ConnectionInfo.macFromBytes(port.macAddress());
            final String at = controller;
            final SwitchMlSidecar.Registrar registrar = (rank, world, mac, address, perPacket) ->
            {
                final SwitchMlRun.SwitchAddress target = SwitchMlRun.register(at, rank, world, mac, address, perPacket);
                return new SwitchMlSidecar.Switch(target.mac(), target.ip());
            };
            EndpointNice.apply(endpointNice, "serve", System.err); // the runner drives the worker on this thread
            return SidecarRunner.runSwitchMl(port, localMac, localIp, settings, registrar, doorbell, answer, socket,
                acceptTimeoutSeconds);
        }
        catch (final IllegalArgumentException ex)
        {
            System.err.println("serve: " + ex.getMessage());
            return 2;
        }
    }
}
