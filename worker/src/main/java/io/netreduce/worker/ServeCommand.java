package io.netreduce.worker;

import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.Doorbell;
import io.netreduce.protocol.port.ThreadNice;
import io.netreduce.worker.sidecar.SidecarRunner;
import org.agrona.concurrent.SystemNanoClock;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.net.InetAddress;
import java.nio.file.Path;
import java.util.concurrent.Callable;

/**
 * {@code netreduce worker serve}: the sidecar a trainer on a host without an RDMA NIC hands its gradient buckets to
 * (the Python package's {@code sidecar} transport starts it). It opens an AF_PACKET port on {@code --dev}, listens
 * on an owner-only Unix socket for its one trainer, and runs the ring the trainer opens, reading and writing the
 * buckets in the shared memory file the trainer names.
 */
@Command(
    name = "serve",
    mixinStandardHelpOptions = true,
    description = "Sidecar for a trainer: runs a NetReduce ring over this host's software RC endpoint, fed through " +
        "shared memory and a Unix socket (see docs/python.md).")
public final class ServeCommand implements Callable<Integer>
{
    @Option(names = "--dev", required = true, description = "Interface to open an AF_PACKET port on.")
    String dev;

    @Option(names = "--ip", description = "Local address (default: the interface's first IPv4 address).")
    String ip;

    @Option(names = "--socket", required = true, description = "Unix socket path to listen on for the trainer " +
        "(created owner-only; its directory must exist and should be private).")
    Path socket;

    @Option(names = "--pmtu", description = "Path MTU, which is the ring's payload size: 256..4096 (default " +
        "${DEFAULT-VALUE}).")
    int pmtu = 4096;

    @Option(names = "--rto-us", description = "Initial RC retransmission timeout in microseconds (default " +
        "${DEFAULT-VALUE}; see worker allreduce --rto-us).")
    long rtoMicros = 400_000;

    @Option(names = "--segmentation-offload", negatable = true, fallbackValue = "true", description = "Send and " +
        "receive runs of packets as UDP segmentation offload frames (see worker allreduce " +
        "--segmentation-offload; default ${DEFAULT-VALUE}).")
    boolean segmentationOffload = true;

    @Option(names = "--endpoint-nice", description = EndpointNice.DESCRIPTION)
    int endpointNice = EndpointNice.DEFAULT;

    @Option(names = "--accept-timeout", description = "Seconds to wait for the trainer to connect (default " +
        "${DEFAULT-VALUE}).")
    int acceptTimeoutSeconds = 60;

    @Override
    public Integer call() throws Exception
    {
        final RcConfig rc;
        try
        {
            rc = new RcConfig().pmtu(pmtu).retransmitTimeoutNs(rtoMicros * 1000);
            ThreadNice.validate(endpointNice);
        }
        catch (final IllegalArgumentException ex)
        {
            System.err.println("serve: " + ex.getMessage());
            return 2;
        }
        final AfPacketConfiguration portConfig = AfPacketConfiguration.defaults(dev)
            .withTxRing(8192, 1024)
            .withRxRing(16384, 1024, AfPacketConfiguration.DEFAULT_RX_BLOCK_TIMEOUT_MS)
            .withSegmentationOffload(segmentationOffload);
        try (AfPacketPort port = AfPacketPort.open(portConfig);
            Doorbell doorbell = new Doorbell())
        {
            final InetAddress localIp = ip != null ? InetAddress.getByName(ip) : AllReduceCommand.interfaceAddress(dev);
            final RcEndpoint endpoint = new RcEndpoint(port, rc, SystemNanoClock.INSTANCE, localIp,
                ConnectionInfo.macFromBytes(port.macAddress()));
            EndpointNice.apply(endpointNice, "serve", System.err); // the runner drives the endpoint on this thread
            return SidecarRunner.run(endpoint, doorbell, socket, acceptTimeoutSeconds);
        }
        catch (final IllegalArgumentException ex)
        {
            System.err.println("serve: " + ex.getMessage());
            return 2;
        }
    }
}
