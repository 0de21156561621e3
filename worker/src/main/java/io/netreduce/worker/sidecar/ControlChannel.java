package io.netreduce.worker.sidecar;

import io.netreduce.protocol.port.UnixControlSocket;
import io.netreduce.protocol.port.WakeupSource;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Queue;

/**
 * The trainer's end of a sidecar: one Unix stream socket, owner-only, accepting exactly one connection (the
 * trainer that started the sidecar). The endpoint loop owns it: its poller waits on the connection's descriptor
 * beside the port ({@link #wakeup()}), so a request wakes the loop directly, and {@link #pump()} reads whatever has
 * arrived without blocking and splits it into request lines. An idle sidecar blocks in poll(2) and costs nothing.
 * Replies are written by the loop, in request order.
 * <p>
 * Requests are per call (a gradient bucket), not per packet, so the line strings are off the hot path.
 */
final class ControlChannel implements AutoCloseable
{
    /** Longest request line: a request is a few hundred bytes; anything longer is not a trainer. */
    static final int MAX_LINE = 64 * 1024;
    private static final int RECEIVE_BYTES = 16 * 1024;

    private final UnixControlSocket socket;
    private final Queue<String> requests = new ArrayDeque<>();
    /** The line being received, as bytes: decoded once whole, so a character split between reads stays whole. */
    private final ByteArrayOutputStream line = new ByteArrayOutputStream();
    private boolean skippingLongLine;
    private boolean closedByPeer;

    ControlChannel(final Path path) throws IOException
    {
        try
        {
            socket = UnixControlSocket.listen(path, RECEIVE_BYTES);
        }
        catch (final IOException ex)
        {
            throw new IOException("--socket " + ex.getMessage(), ex);
        }
    }

    /**
     * Wait for the trainer to connect. Blocks: called before the endpoint loop runs.
     */
    void accept() throws IOException
    {
        socket.accept();
    }

    /**
     * @return what the endpoint loop's poller also waits on: the trainer's connection.
     */
    WakeupSource wakeup()
    {
        return socket;
    }

    /**
     * Take every byte the trainer has sent so far (without waiting) and queue its complete lines; the loop calls it
     * every duty cycle, in a call or not, so a readable socket never keeps its poller awake.
     *
     * @return how many lines were queued.
     */
    int pump()
    {
        if (closedByPeer)
        {
            return 0;
        }
        int queued = 0;
        int read;
        while ((read = socket.receive()) > 0)
        {
            final MemorySegment bytes = socket.received();
            int start = 0;
            for (int i = 0; i < read; i++)
            {
                if (bytes.get(ValueLayout.JAVA_BYTE, i) == '\n')
                {
                    append(bytes, start, i);
                    requests.add(skippingLongLine ? Requests.TOO_LONG : line.toString(StandardCharsets.UTF_8));
                    line.reset();
                    skippingLongLine = false;
                    queued++;
                    start = i + 1;
                }
            }
            append(bytes, start, read);
        }
        if (read < 0)
        {
            closedByPeer = true;
        }
        return queued;
    }

    private void append(final MemorySegment bytes, final int from, final int to)
    {
        if (skippingLongLine || to <= from)
        {
            return;
        }
        if (line.size() + (to - from) > MAX_LINE)
        {
            skippingLongLine = true;
            line.reset();
            return;
        }
        line.writeBytes(bytes.asSlice(from, to - from).toArray(ValueLayout.JAVA_BYTE));
    }

    /**
     * @return the next request line, or null if none is waiting.
     */
    String poll()
    {
        pump();
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
        socket.send((json + "\n").getBytes(StandardCharsets.UTF_8));
    }

    @Override
    public void close()
    {
        socket.close();
    }
}
