package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The trainer's side of a sidecar's control socket in tests: the connection, one JSON request line out, its reply
 * line back.
 */
final class SidecarLines
{
    /** A trainer's connection to a sidecar's control socket: the channel, and its reply lines and request stream. */
    record Connection(SocketChannel client, BufferedReader in, OutputStream out)
    {
    }
    /** The trainer's reader of replies: a full ObjectMapper, not the sidecar's own (Requests). */
    static final ObjectMapper JSON = new ObjectMapper();

    private SidecarLines()
    {
    }

    /**
     * Send {@code line} and read the reply on {@code threads}, waiting at most {@code seconds}.
     */
    static JsonNode ask(
        final OutputStream out, final BufferedReader in, final ExecutorService threads, final String line,
        final long seconds) throws Exception
    {
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
        final String reply = CompletableFuture.supplyAsync(() ->
        {
            try
            {
                return in.readLine();
            }
            catch (final Exception ex)
            {
                throw new IllegalStateException(ex);
            }
        }, threads).get(seconds, TimeUnit.SECONDS);
        assertThat(reply).isNotNull();
        return JSON.readTree(reply);
    }

    /**
     * Connect to {@code control}'s socket at {@code socket} as the trainer does, {@code control} accepting on
     * {@code threads} (at most 10 s).
     */
    static Connection connect(final ControlChannel control, final Path socket, final ExecutorService threads)
        throws Exception
    {
        final CompletableFuture<Void> accepted = CompletableFuture.runAsync(() ->
        {
            try
            {
                control.accept();
            }
            catch (final Exception ex)
            {
                throw new IllegalStateException(ex);
            }
        }, threads);
        final SocketChannel client = SocketChannel.open(StandardProtocolFamily.UNIX);
        client.connect(UnixDomainSocketAddress.of(socket));
        accepted.get(10, TimeUnit.SECONDS);
        return new Connection(client,
            new BufferedReader(new InputStreamReader(Channels.newInputStream(client), StandardCharsets.UTF_8)),
            Channels.newOutputStream(client));
    }
}
