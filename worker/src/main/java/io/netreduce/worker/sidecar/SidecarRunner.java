package io.netreduce.worker.sidecar;

import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.port.Doorbell;

import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs a {@link Sidecar} on an open endpoint: listen, wait for the trainer, serve, clean up the socket.
 */
public final class SidecarRunner
{
    private SidecarRunner()
    {
    }

    /**
     * @return the process exit status: 0 after a {@code close} or the trainer going away, 1 if it never came.
     */
    public static int run(final RcEndpoint endpoint, final Doorbell doorbell, final Path socket,
        final int acceptTimeoutSeconds) throws IOException
    {
        try (ControlChannel control = new ControlChannel(socket, doorbell))
        {
            // Tell whoever started us that the socket is there (the Python side waits for this line).
            System.out.println("listening " + socket);
            System.out.flush();
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
            new Sidecar(endpoint, control, endpoint.idleStrategy(doorbell)).run();
            return 0;
        }
    }
}
