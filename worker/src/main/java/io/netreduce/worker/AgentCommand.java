package io.netreduce.worker;

import io.netreduce.host.allreduce.RingWarmUp;
import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.ThreadNice;
import io.netreduce.protocol.port.UnixFdListener;
import io.netreduce.worker.sidecar.SidecarAgent;
import io.netreduce.worker.sidecar.SidecarRunner;
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
        "(default ${DEFAULT-VALUE}); later sessions find the packet path compiled and run none. Not run after a " +
        "start warm-up (--start-warm-up-frames).")
    long warmUpFrames = RingWarmUp.DEFAULT_FRAMES;

    @Option(names = "--start-warm-up-frames", description = "Before it takes sessions, run a ring of three ranks " +
        "over AF_PACKET ports of --start-warm-up-dev with a session's port settings for this many packets (at most " +
        "20 s; about 1 s alone on a 2-core machine), so that even the host's first training finds the packet path " +
        "compiled (0: none; default ${DEFAULT-VALUE}).")
    long startWarmUpFrames = START_WARM_UP_FRAMES;

    @Option(names = "--start-warm-up-dev", description = "The interface of the start warm-up (default " +
        "${DEFAULT-VALUE}): each rank takes only frames to its own random MAC, which the host's stack drops.")
    String startWarmUpDev = "lo";

    /**
     * Packets of the start warm-up: on the 2-core bed, 131,072 left the first cnn training at 1.12-1.16 x gloo's
     * median step and 524,288 at 1.00-1.05 (two runs each, in turn), in 1.6-3.5 s with four agents starting at once.
     */
    static final long START_WARM_UP_FRAMES = 524_288;
    /** Longest the start warm-up may take, whatever it has done by then. */
    static final long START_WARM_UP_MAX_NANOS = 20_000_000_000L;
    /** The start warm-up's ring: a Session's defaults (window 16, MsgLen 16, 4 KiB payloads, fp32, 64 MiB). */
    private static final int WARM_UP_WINDOW = 16;
    private static final int WARM_UP_MSG_LEN = 16;
    private static final long WARM_UP_SHM_BYTES = 64L << 20;

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
            SidecarRunner.requireSocketDirectory(socket);
            // the interface is there and ours to open, before anything else starts
            try (AfPacketPort probe = AfPacketPort.open(ServeCommand.portConfiguration(dev, segmentationOffload,
                new RcConfig())))
            {
                ServeCommand.noteOffload("agent", probe, segmentationOffload);
            }
        }
        catch (final RuntimeException ex)
        {
            System.err.println("agent: " + ex.getMessage());
            return 2;
        }
        final InetAddress localIp = ip != null ? InetAddress.getByName(ip) : AllReduceCommand.interfaceAddress(dev);
        final boolean warmed = startWarmUpFrames > 0 && startWarmUp();
        try (UnixFdListener door = UnixFdListener.open(socket))
        {
            final SidecarAgent agent = new SidecarAgent(door, rc ->
            {
                final AfPacketPort port = AfPacketPort.open(ServeCommand.portConfiguration(dev, segmentationOffload,
                    rc));
                return new RcEndpoint(port, rc, SystemNanoClock.INSTANCE, localIp,
                    ConnectionInfo.macFromBytes(port.macAddress()));
            }, maxSessions, warmed ? 0 : warmUpFrames,
                session -> EndpointNice.apply(endpointNice, "agent", System.err), System.err);
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

    /**
     * The start warm-up: a session's ring on three AF_PACKET ports of {@link #startWarmUpDev} ({@link LoopbackWarmUp}),
     * so that the JIT compiles the packet path, the real port's code and all, before any trainer waits for it.
     *
     * @return whether it ran; when it cannot (the interface down, no rights), the agent says why and goes on.
     */
    private boolean startWarmUp()
    {
        final RcConfig rc = new RcConfig();
        final long messageBytes = (long)WARM_UP_MSG_LEN * rc.pmtu();
        final int areaMessages = (int)Math.min(WARM_UP_SHM_BYTES / (2 * messageBytes), 2 * WARM_UP_WINDOW);
        final RingWarmUp.Report report = LoopbackWarmUp.run(
            ServeCommand.portConfiguration(startWarmUpDev, segmentationOffload, rc), rc, WARM_UP_WINDOW,
            WARM_UP_MSG_LEN, ElementType.FP32, areaMessages, startWarmUpFrames, START_WARM_UP_MAX_NANOS,
            "agent: start", System.err);
        return report != null && report.failure() == null;
    }
}
