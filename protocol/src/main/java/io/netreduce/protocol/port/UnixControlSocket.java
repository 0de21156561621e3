package io.netreduce.protocol.port;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * A Unix stream socket that accepts exactly one peer (a sidecar's trainer), owned by a loop that also drives a
 * port: the loop reads it without blocking ({@link #receive}) and its {@link PortPoller} waits on the connection's
 * descriptor itself ({@link WakeupSource}), so a request wakes the loop directly. A reader thread handing lines to
 * the loop through a queue and an eventfd costs a second thread wake-up per request, which on a host whose cores are
 * all busy training waits for a time slice of its own.
 * <p>
 * Written with FFM (socket, bind, listen, accept4, recv, write): Java's Unix-domain channels do not expose their
 * descriptor to poll(2) beside the ports'. The socket file is created owner-only (0600) and removed on close.
 * {@link #accept} may be called on any thread; after it, one thread owns the socket.
 */
public final class UnixControlSocket implements WakeupSource, AutoCloseable
{
    private static final int AF_UNIX = 1;
    private static final int SOCK_STREAM = 1;
    private static final int SOCK_CLOEXEC = 0x80000;
    private static final int MSG_DONTWAIT = 0x40;
    private static final int EAGAIN = 11;
    private static final int EINTR = 4;
    /** sizeof(struct sockaddr_un): sa_family_t then char sun_path[108]. */
    private static final int SOCKADDR_UN_SIZE = 110;
    private static final int SUN_PATH_OFFSET = 2;
    private static final int SUN_PATH_MAX = 107;

    private final Path path;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment errnoState = Libc.allocateErrnoState(arena);
    private final MemorySegment receiveBuffer;
    private int listenFd;
    private volatile int clientFd = -1;
    private boolean closed;

    private UnixControlSocket(final Path path, final int receiveBufferBytes)
    {
        this.path = path;
        this.receiveBuffer = arena.allocate(receiveBufferBytes, 8);
    }

    /**
     * Create the socket file at {@code path} (owner-only) and listen.
     *
     * @param receiveBufferBytes the most one {@link #receive} call returns.
     * @throws IOException if the directory is missing, a file is already there, or the path is too long.
     */
    public static UnixControlSocket listen(final Path path, final int receiveBufferBytes) throws IOException
    {
        final Path dir = path.toAbsolutePath().getParent();
        if (dir == null || !Files.isDirectory(dir))
        {
            throw new IOException(path + ": directory " + dir + " does not exist");
        }
        if (Files.exists(path))
        {
            throw new IOException(path + ": a file is already there (another sidecar?)");
        }
        final byte[] name = path.toString().getBytes(StandardCharsets.UTF_8);
        if (name.length > SUN_PATH_MAX)
        {
            throw new IOException(path + ": longer than the " + SUN_PATH_MAX + " bytes a Unix socket path may have");
        }
        final UnixControlSocket socket = new UnixControlSocket(path, receiveBufferBytes);
        try
        {
            socket.bindAndListen(name);
            return socket;
        }
        catch (final IOException | RuntimeException ex)
        {
            socket.close();
            throw ex;
        }
    }

    private void bindAndListen(final byte[] name) throws IOException
    {
        listenFd = Libc.socket(errnoState, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listenFd < 0)
        {
            throw new IOException("socket(AF_UNIX): " + Libc.strerror(Libc.errno(errnoState)));
        }
        try (Arena scratch = Arena.ofConfined())
        {
            final MemorySegment address = scratch.allocate(SOCKADDR_UN_SIZE, 2);
            address.set(ValueLayout.JAVA_SHORT, 0, (short)AF_UNIX);
            MemorySegment.copy(name, 0, address, ValueLayout.JAVA_BYTE, SUN_PATH_OFFSET, name.length);
            if (Libc.bind(errnoState, listenFd, address, SOCKADDR_UN_SIZE) < 0)
            {
                throw new IOException("bind " + path + ": " + Libc.strerror(Libc.errno(errnoState)));
            }
        }
        // Owner-only: whoever can connect runs all-reduces with this rank's identity on the ring.
        Files.setPosixFilePermissions(path, PosixFilePermissions.fromString("rw-------"));
        if (Libc.listen(errnoState, listenFd, 1) < 0)
        {
            throw new IOException("listen " + path + ": " + Libc.strerror(Libc.errno(errnoState)));
        }
    }

    /**
     * Block until the peer connects; no other connection is accepted after it.
     */
    public void accept() throws IOException
    {
        try (Arena scratch = Arena.ofConfined())
        {
            final MemorySegment errno = Libc.allocateErrnoState(scratch);
            int fd;
            do
            {
                fd = Libc.accept4(errno, listenFd, SOCK_CLOEXEC);
            }
            while (fd < 0 && Libc.errno(errno) == EINTR);
            if (fd < 0)
            {
                throw new IOException("accept on " + path + ": " + Libc.strerror(Libc.errno(errno)));
            }
            clientFd = fd;
        }
    }

    /**
     * Read what the peer has sent, without waiting.
     *
     * @return bytes read into {@link #received()} (0 if none are waiting), or -1 once the peer has closed (or the
     *         connection failed).
     */
    public int receive()
    {
        final long read = Libc.recv(errnoState, clientFd, receiveBuffer, receiveBuffer.byteSize(), MSG_DONTWAIT);
        if (read > 0)
        {
            return (int)read;
        }
        if (read < 0)
        {
            final int errno = Libc.errno(errnoState);
            if (errno == EAGAIN || errno == EINTR)
            {
                return 0;
            }
        }
        return -1;
    }

    /**
     * @return the buffer {@link #receive} fills (valid up to the count it returned, until the next call).
     */
    public MemorySegment received()
    {
        return receiveBuffer;
    }

    /**
     * Write all of {@code bytes} to the peer (blocking while its buffer is full).
     */
    public void send(final byte[] bytes) throws IOException
    {
        try (Arena scratch = Arena.ofConfined())
        {
            final MemorySegment data = scratch.allocate(Math.max(1, bytes.length));
            MemorySegment.copy(bytes, 0, data, ValueLayout.JAVA_BYTE, 0, bytes.length);
            long sent = 0;
            while (sent < bytes.length)
            {
                final long written = Libc.write(errnoState, clientFd, data.asSlice(sent), bytes.length - sent);
                if (written < 0)
                {
                    if (Libc.errno(errnoState) == EINTR)
                    {
                        continue;
                    }
                    throw new IOException("write to " + path + ": " + Libc.strerror(Libc.errno(errnoState)));
                }
                sent += written;
            }
        }
    }

    /**
     * @return the connection's descriptor (the poller waits on it; the owner reads it).
     */
    @Override
    public int fd()
    {
        return clientFd;
    }

    /**
     * Nothing to reset: the owner's {@link #receive} takes what made the descriptor readable.
     */
    @Override
    public boolean drain()
    {
        return false;
    }

    @Override
    public synchronized void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        if (clientFd >= 0)
        {
            Libc.close(errnoState, clientFd);
        }
        if (listenFd > 0)
        {
            Libc.close(errnoState, listenFd);
        }
        try
        {
            Files.deleteIfExists(path);
        }
        catch (final IOException ignored)
        {
            // closing: nothing left to tell anyone
        }
        arena.close();
    }
}
