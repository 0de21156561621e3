package io.netreduce.worker.sidecar;

import io.netreduce.host.allreduce.CongestionControl;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.port.Doorbell;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.port.PortPoller;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;

/**
 * Runs a sidecar on an open port: listen, wait for the trainer, serve, clean up the socket. A {@link Sidecar} (a
 * NetReduce ring over an RC endpoint) or a {@link SwitchMlSidecar}.
 */
public final class SidecarRunner
{
    private SidecarRunner()
    {
    }

    /**
     * A control socket's directory must be there: the listener would refuse the path only once a port is open (and,
     * for the agent, its warm-up run), so the commands ask this with their option checks.
     *
     * @throws IllegalArgumentException naming the option, the path and the missing directory.
     */
    public static void requireSocketDirectory(final Path socket)
    {
        final Path dir = socket.toAbsolutePath().getParent();
        if (dir == null || !Files.isDirectory(dir))
        {
            throw new IllegalArgumentException("--socket " + socket + ": directory " + dir + " does not exist");
        }
    }

    /**
     * @return the process exit status: 0 after a {@code close} or the trainer going away, 1 if it never came.
     */
    public static int run(final RcEndpoint endpoint, final Doorbell doorbell, final Path socket,
        final int acceptTimeoutSeconds) throws IOException
    {
        return run(endpoint, doorbell, null, socket, acceptTimeoutSeconds);
    }

    /**
     * @param doorbell   what the endpoint loop polls besides its port: rung for each request line, and by the
     *                   trainer itself for a call on the call page when the trainer made it ({@link CallPage}).
     * @param answerBell the trainer's eventfd for answers on the call page; null: calls as JSON lines only.
     * @return the process exit status, as {@link #run(RcEndpoint, Doorbell, Path, int)}'s.
     */
    public static int run(final RcEndpoint endpoint, final Doorbell doorbell, final Doorbell answerBell,
        final Path socket, final int acceptTimeoutSeconds) throws IOException
    {
        return run(endpoint, doorbell, answerBell, socket, acceptTimeoutSeconds, 0);
    }

    /**
     * @param warmUpFrames frames of the warm-up run between the ring's connect and its first call (0: none).
     * @return the process exit status, as {@link #run(RcEndpoint, Doorbell, Path, int)}'s.
     */
    public static int run(final RcEndpoint endpoint, final Doorbell doorbell, final Doorbell answerBell,
        final Path socket, final int acceptTimeoutSeconds, final long warmUpFrames) throws IOException
    {
        return run(endpoint, doorbell, answerBell, socket, acceptTimeoutSeconds, warmUpFrames,
            SidecarRunner::printListening);
    }

    /**
     * @param listening told once the socket is there, before the wait for the trainer (a sidecar prints its
     *                  "listening" line; the {@link SidecarAgent} answers the trainer that asked for the session).
     * @return the process exit status, as {@link #run(RcEndpoint, Doorbell, Path, int)}'s.
     */
    public static int run(final RcEndpoint endpoint, final Doorbell doorbell, final Doorbell answerBell,
        final Path socket, final int acceptTimeoutSeconds, final long warmUpFrames, final Listening listening)
        throws IOException
    {
        return run(doorbell, answerBell, socket, acceptTimeoutSeconds, listening,
            control -> new Sidecar(endpoint, control, endpoint.idleStrategy(doorbell), CongestionControl.DEFAULT,
                warmUpFrames));
    }

    /**
     * Told that the control socket is there.
     */
    @FunctionalInterface
    public interface Listening
    {
        void listening(Path socket) throws IOException;
    }

    private static void printListening(final Path socket)
    {
        // Tell whoever started us that the socket is there (the Python side waits for this line).
        System.out.println("listening " + socket);
        System.out.flush();
    }

    /**
     * A SwitchML worker's sidecar on {@code port} (see {@link SwitchMlSidecar}).
     *
     * @return the process exit status, as {@link #run(RcEndpoint, Doorbell, Path, int)}'s.
     */
    public static int runSwitchMl(
        final PacketPort port, final long localMac, final int localIp, final SwitchMlSidecar.Settings settings,
        final SwitchMlSidecar.Registrar registrar, final Doorbell doorbell, final Doorbell answerBell,
        final Path socket, final int acceptTimeoutSeconds) throws IOException
    {
        try (PortPoller poller = new PortPoller(List.of(port), doorbell))
        {
            return run(doorbell, answerBell, socket, acceptTimeoutSeconds, SidecarRunner::printListening,
                control -> new SwitchMlSidecar(port, poller, localMac, localIp, settings, registrar, control));
        }
    }

    private static int run(final Doorbell doorbell, final Doorbell answerBell, final Path socket,
        final int acceptTimeoutSeconds, final Listening listening,
        final Function<ControlChannel, SidecarLoop> sidecar) throws IOException
    {
        try (ControlChannel control = new ControlChannel(socket, doorbell, answerBell))
        {
            listening.listening(socket);
            final CompletableFuture<Void> accepted = new CompletableFuture<>();
            // A thread of its own: accept blocks, and the common pool may have a single thread.
            Thread.ofPlatform().daemon().name("sidecar-accept").start(() ->
            {
                try
                {
                    control.accept();
                    accepted.complete(null);
                }
                catch (final IOException ex)
                {
                    accepted.completeExceptionally(ex);
                }
            });
            try
            {
                accepted.get(acceptTimeoutSeconds, TimeUnit.SECONDS);
            }
            catch (final TimeoutException ex)
            {
                System.err.println("serve: no trainer connected to " + socket + " within " + acceptTimeoutSeconds +
                    " s");
                return 1;
            }
            catch (final Exception ex)
            {
                System.err.println("serve: accepting on " + socket + " failed: " + ex.getMessage());
                return 1;
            }
            sidecar.apply(control).run();
            return 0;
        }
    }
}
