package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import io.netreduce.host.allreduce.CongestionControl;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.port.Doorbell;
import io.netreduce.protocol.port.MemoryPort;
import org.agrona.concurrent.SystemNanoClock;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.nio.channels.FileChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * A sidecar loop served on a thread of its own behind a real Unix socket and a real doorbell eventfd (and, if asked,
 * the trainer's answer eventfd), with a trainer's connection to it: what the sidecar tests share.
 */
final class SidecarHarness implements AutoCloseable
{
    // Own threads: the common pool has one thread on a 2-core machine, and these tasks block.
    final ExecutorService threads = Executors.newCachedThreadPool();
    final Path socket;
    final Doorbell doorbell;
    /** The trainer's answer eventfd, or null. */
    final Doorbell answer;
    final ControlChannel control;
    final SocketChannel client;
    final BufferedReader in;
    final OutputStream out;
    private CompletableFuture<Void> served;

    SidecarHarness(final Path socket, final boolean withAnswerBell) throws Exception
    {
        this.socket = socket;
        doorbell = new Doorbell();
        answer = withAnswerBell ? new Doorbell() : null;
        control = new ControlChannel(socket, doorbell, answer);
        final SidecarLines.Connection connection = SidecarLines.connect(control, socket, threads);
        client = connection.client();
        in = connection.in();
        out = connection.out();
    }

    /**
     * Serve the loop made on the control channel until the trainer closes or goes away.
     */
    SidecarHarness serve(final Function<SidecarHarness, SidecarLoop> loop)
    {
        final SidecarLoop sidecar = loop.apply(this);
        served = CompletableFuture.runAsync(() ->
        {
            try
            {
                sidecar.run();
            }
            catch (final IOException ex)
            {
                throw new IllegalStateException(ex);
            }
        }, threads);
        return this;
    }

    /**
     * A NetReduce sidecar on a software endpoint over a memory port (PMTU 4096), woken by the harness's doorbell.
     */
    static Sidecar memorySidecar(final SidecarHarness harness)
    {
        return memorySidecar(harness, 0);
    }

    /**
     * The same, running a warm-up of {@code warmUpFrames} frames between its connect and its first call.
     */
    static Sidecar memorySidecar(final SidecarHarness harness, final long warmUpFrames)
    {
        try
        {
            final RcEndpoint endpoint = new RcEndpoint(new MemoryPort("sidecar"), new RcConfig().pmtu(4096),
                SystemNanoClock.INSTANCE, InetAddress.getByName("10.0.0.1"), 0x02_00_00_00_00_01L);
            return new Sidecar(endpoint, harness.control, endpoint.idleStrategy(harness.doorbell),
                CongestionControl.DEFAULT, warmUpFrames);
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * @return whether {@code bell} rang within 10 s (drained). The loop writes a page word before it rings, so a test
     * that has seen the word may look before the ring.
     */
    static boolean awaitBell(final Doorbell bell) throws InterruptedException
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!bell.drain())
        {
            if (System.nanoTime() > deadline)
            {
                return false;
            }
            Thread.sleep(1);
        }
        return true;
    }

    JsonNode ask(final String line) throws Exception
    {
        return SidecarLines.ask(out, in, threads, line, 10);
    }

    /**
     * @return the call page at {@code offset} of the shared file, mapped as the trainer maps it.
     */
    static UnsafeBuffer mapPage(final Path shm, final long offset) throws IOException
    {
        try (FileChannel file = FileChannel.open(shm, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            return new UnsafeBuffer(file.map(FileChannel.MapMode.READ_WRITE, offset, CallPage.LENGTH));
        }
    }

    @Override
    public void close() throws Exception
    {
        try
        {
            client.close();
            if (served != null)
            {
                served.get(10, TimeUnit.SECONDS);
            }
            control.close();
            doorbell.close();
            if (answer != null)
            {
                answer.close();
            }
        }
        finally
        {
            threads.shutdownNow();
        }
    }
}
