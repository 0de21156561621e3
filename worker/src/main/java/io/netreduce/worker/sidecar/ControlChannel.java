package io.netreduce.worker.sidecar;

import io.netreduce.protocol.port.Doorbell;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The trainer's end of a sidecar: one Unix stream socket, owner-only, accepting exactly one connection (the
 * trainer that started the sidecar). A reader thread blocks on it, queues each request line and rings the
 * {@link Doorbell} the endpoint loop sleeps on, so a request wakes the loop at once and an idle sidecar costs
 * nothing. Replies are written by the endpoint loop, in request order.
 * <p>
 * Requests are per call (a gradient bucket), not per packet, so the queue's allocation is off the hot path.
 */
final class ControlChannel implements AutoCloseable
{
    /** Longest request line: a request is a few hundred bytes; anything longer is not a trainer. */
    static final int MAX_LINE = 64 * 1024;

    private final Path path;
    private final ServerSocketChannel server;
    private final Doorbell doorbell;
    private final Doorbell answerBell;
    private final Queue<String> requests = new ConcurrentLinkedQueue<>();
    private volatile boolean closedByPeer;
    private SocketChannel client;
    private OutputStream out;

    ControlChannel(final Path path, final Doorbell doorbell) throws IOException
    {
        this(path, doorbell, null);
    }

    /**
     * @param doorbell   rung for each request line (and by the trainer itself for a call on the {@link CallPage},
     *                   when it made this eventfd and passed it down).
     * @param answerBell the trainer's eventfd, rung after each answer on the call page; null when the trainer gave
     *                   none (then calls come as JSON lines only).
     */
    ControlChannel(final Path path, final Doorbell doorbell, final Doorbell answerBell) throws IOException
    {
        this.path = path;
        this.doorbell = doorbell;
        this.answerBell = answerBell;
        SidecarRunner.requireSocketDirectory(path);
        if (Files.exists(path))
        {
            throw new IOException("--socket " + path + ": a file is already there (another sidecar?)");
        }
        server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(path));
        // Owner-only: any process that can connect can run all-reduces with this rank's identity on the ring.
        Files.setPosixFilePermissions(path, PosixFilePermissions.fromString("rw-------"));
    }

    /**
     * Wait for the trainer to connect, then start the reader thread. Blocks: called before the endpoint loop runs.
     */
    void accept() throws IOException
    {
        client = server.accept();
        out = Channels.newOutputStream(client);
        Thread.ofPlatform().daemon().name("sidecar-control").start(this::readLoop);
    }

    private void readLoop()
    {
        try (BufferedReader reader = new BufferedReader(
            new InputStreamReader(Channels.newInputStream(client), StandardCharsets.UTF_8), 8192))
        {
            final StringBuilder line = new StringBuilder();
            int c;
            while ((c = reader.read()) >= 0)
            {
                if (c == '\n')
                {
                    requests.add(line.toString());
                    line.setLength(0);
                    doorbell.ring();
                }
                else if (line.length() < MAX_LINE)
                {
                    line.append((char)c);
                }
                else
                {
                    requests.add(Requests.TOO_LONG);
                    line.setLength(0);
                    doorbell.ring();
                    // skip to the end of the line
                    while ((c = reader.read()) >= 0 && c != '\n')
                    {
                    }
                }
            }
        }
        catch (final IOException ignored)
        {
            // the trainer went away: same as end of stream
        }
        closedByPeer = true;
        doorbell.ring();
    }

    /**
     * @return the trainer's answer eventfd, or null if it gave none.
     */
    Doorbell answerBell()
    {
        return answerBell;
    }

    /**
     * @return the next request line, or null if none is waiting.
     */
    String poll()
    {
        return requests.poll();
    }

    /**
     * @return true once the trainer closed its end and every request it sent has been taken.
     */
    boolean isClosed()
    {
        return closedByPeer && requests.isEmpty();
    }

    void reply(final String json) throws IOException
    {
        out.write((json + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    @Override
    public void close()
    {
        try
        {
            if (client != null)
            {
                client.close();
            }
            server.close();
            Files.deleteIfExists(path);
        }
        catch (final IOException ignored)
        {
            // closing: nothing left to tell anyone
        }
    }
}
