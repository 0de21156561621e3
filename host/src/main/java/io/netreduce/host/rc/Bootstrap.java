package io.netreduce.host.rc;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;

/**
 * Out-of-band connection setup, the way {@code ibv_rc_pingpong} and perftest do it: one side listens on a TCP
 * port, the other connects, and each sends its {@link ConnectionInfo} as one text line. The TCP connection stays
 * open for the caller's own lines (test parameters, results, "done"), so it doubles as a control channel.
 * <p>
 * {@link #exchangeViaFiles} does the same through two files for setups without a TCP path.
 */
public final class Bootstrap implements AutoCloseable
{
    private final Socket socket;
    private final BufferedReader reader;
    private final Writer writer;

    private Bootstrap(final Socket socket) throws IOException
    {
        this.socket = socket;
        this.reader = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.US_ASCII));
        this.writer = new OutputStreamWriter(socket.getOutputStream(), StandardCharsets.US_ASCII);
    }

    /**
     * Listen on {@code port} (all addresses) and accept one peer.
     */
    public static Bootstrap listen(final int port, final Duration timeout) throws IOException
    {
        try (ServerSocket server = new ServerSocket())
        {
            server.setReuseAddress(true);
            server.bind(new InetSocketAddress(port));
            server.setSoTimeout((int)Math.min(Integer.MAX_VALUE, timeout.toMillis()));
            final Socket socket = server.accept();
            socket.setTcpNoDelay(true);
            return new Bootstrap(socket);
        }
    }

    /**
     * Connect to a listening peer, retrying until {@code timeout} (the peer may not be listening yet).
     */
    public static Bootstrap connect(final String host, final int port, final Duration timeout) throws IOException
    {
        final long deadline = System.nanoTime() + timeout.toNanos();
        IOException last = null;
        while (System.nanoTime() - deadline < 0)
        {
            final Socket socket = new Socket();
            try
            {
                socket.connect(new InetSocketAddress(host, port), 1000);
                socket.setTcpNoDelay(true);
                return new Bootstrap(socket);
            }
            catch (final IOException ex)
            {
                last = ex;
                socket.close();
                try
                {
                    Thread.sleep(50);
                }
                catch (final InterruptedException ie)
                {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted while connecting to " + host + ":" + port, ie);
                }
            }
        }
        throw new IOException("could not connect to " + host + ":" + port + " within " + timeout, last);
    }

    /**
     * Send ours, receive theirs.
     */
    public ConnectionInfo exchange(final ConnectionInfo local) throws IOException
    {
        sendLine(local.toLine());
        final String line = readLine();
        if (line == null)
        {
            throw new IOException("peer closed the bootstrap connection before sending its parameters");
        }
        return ConnectionInfo.parse(line);
    }

    public void sendLine(final String line) throws IOException
    {
        writer.write(line);
        writer.write('\n');
        writer.flush();
    }

    /**
     * @return the next line, or null at end of stream.
     */
    public String readLine() throws IOException
    {
        return reader.readLine();
    }

    /**
     * @param timeout how long to wait; zero waits forever.
     * @return the next line, or null at end of stream.
     * @throws SocketTimeoutException if nothing arrived in time.
     */
    public String readLine(final Duration timeout) throws IOException
    {
        socket.setSoTimeout((int)Math.min(Integer.MAX_VALUE, timeout.toMillis()));
        return reader.readLine();
    }

    /**
     * File variant: write ours to {@code mine} (atomically), then wait for the peer's {@code theirs}.
     */
    public static ConnectionInfo exchangeViaFiles(
        final ConnectionInfo local, final Path mine, final Path theirs, final Duration timeout) throws IOException
    {
        final Path temporary = mine.resolveSibling(mine.getFileName() + ".tmp");
        Files.writeString(temporary, local.toLine() + "\n", StandardCharsets.US_ASCII);
        Files.move(temporary, mine, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        final long deadline = System.nanoTime() + timeout.toNanos();
        while (!Files.exists(theirs))
        {
            if (System.nanoTime() - deadline >= 0)
            {
                throw new IOException("peer parameters " + theirs + " did not appear within " + timeout);
            }
            try
            {
                Thread.sleep(20);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted", ex);
            }
        }
        return ConnectionInfo.parse(Files.readString(theirs, StandardCharsets.US_ASCII));
    }

    @Override
    public void close()
    {
        try
        {
            socket.close();
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }
}
