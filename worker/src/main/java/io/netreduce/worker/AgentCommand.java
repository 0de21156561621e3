package io.netreduce.worker;

import io.netreduce.host.allreduce.RingWarmUp;
import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.ThreadNice;
import io.netreduce.protocol.port.UnixFdListener;
import io.netreduce.worker.sidecar.SidecarAgent;
import org.agrona.concurrent.SystemNanoClock;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Path;
import java.util.concurrent.Callable;

/**
 * {@code netreduce worker agent}: a host's sidecars in one long-lived process ({@link SidecarAgent}), so that the
 * JIT compiles the packet path once per host rather than once per training. Run it under systemd beside the
 * trainers (or by hand); a Session finds it through {@code agent=} or {@code NETREDUCE_AGENT} (docs/python.md).
 */
@Command(
    name = "agent",
    mixinStandardHelpOptions = true,
    description = "A host's NetReduce sidecars in one long-lived process: each trainer that connects to --socket " +
        "gets a session, as from its own `worker serve`, and every session after the first runs on code the JIT " +
        "has already compiled (see docs/python.md).")
public final class AgentCommand implements Callable<Integer>
{
    @Option(names = "--dev", required = true, description = "Interface each session opens its AF_PACKET port on.")
    String dev;

    @Option(names = "--ip", description = "Local address (default: the interface's first IPv4 address).")
    String ip;

    @Option(names = "--socket", required = true, description = "Unix socket path the trainers ask for sessions on " +
        "(created owner-only; only this user and root may start a session).")
    Path socket;

    @Option(names = "--max-sessions", description = "Sessions at once, one per trainer process on this host " +
        "(default ${DEFAULT-VALUE}).")
    int maxSessions = 16;

    @Option(names = "--segmentation-offload", negatable = true, fallbackValue = "true", description = "As worker " +
        "serve's (default ${DEFAULT-VALUE}).")
    boolean segmentationOffload = true;

    @Option(names = "--endpoint-nice", description = EndpointNice.DESCRIPTION)
    int endpointNice = EndpointNice.DEFAULT;

    @Option(names = "--warm-up-frames", description = "The first session's in-memory warm-up, as worker serve's " +
        "(default ${DEFAULT-VALUE}); later sessions find the packet path compiled and run none.")
    long warmUpFrames = RingWarmUp.DEFAULT_FRAMES;

    @Override
    public Integer call() throws Exception
    {
        try
        {
            ThreadNice.validate(endpointNice);
            if (maxSessions < 1 || maxSessions > 256)
            {
                throw new IllegalArgumentException("--max-sessions must be 1..256: " + maxSessions);
            }
            AfPacketPort.open(ServeCommand.portConfiguration(dev, segmentationOffload,
                new io.netreduce.host.rc.RcConfig())).close(); // the interface is there and ours to open
        }
        catch (final RuntimeException ex)
        {
            System.err.println("agent: " + ex.getMessage());
            return 2;
        }
        final InetAddress localIp = ip != null ? InetAddress.getByName(ip) : AllReduceCommand.interfaceAddress(dev);
        try (UnixFdListener door = UnixFdListener.open(socket))
        {
            final SidecarAgent agent = new SidecarAgent(door, rc ->
            {
                final AfPacketPort port = AfPacketPort.open(ServeCommand.portConfiguration(dev, segmentationOffload,
                    rc));
                return new RcEndpoint(port, rc, SystemNanoClock.INSTANCE, localIp,
                    ConnectionInfo.macFromBytes(port.macAddress()));
            }, maxSessions, warmUpFrames, session -> EndpointNice.apply(endpointNice, "agent", System.err),
                System.err);
            Runtime.getRuntime().addShutdownHook(new Thread(door::close));
            System.out.println("listening " + socket);
            System.out.flush();
            agent.run();
            return 0;
        }
        catch (final IOException ex)
        {
            System.err.println("agent: " + ex.getMessage());
            return 1;
        }
    }
}
