package io.netreduce.protocol.port;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Arrays;

import static io.netreduce.protocol.port.LinuxPacketAbi.SOL_SOCKET;

/**
 * A Unix stream socket whose connections may hand this process file descriptors with their first line
 * ({@code SCM_RIGHTS}): the sidecar agent's door ({@code netreduce worker agent}), through which each trainer passes
 * its call page's two eventfds, as a sidecar that the trainer starts inherits them. Java's own Unix-domain channels
 * carry bytes only, hence these FFM calls. Blocking: one thread accepts, and whoever took a connection reads it.
 * <p>
 * The socket file is made owner-only, and {@link Connection#peerUid()} gives the kernel's word for who connected
 * ({@code SO_PEERCRED}), so that a caller may also refuse a peer that connected between the bind and the chmod.
 */
public final class UnixFdListener implements AutoCloseable
{
    static final int AF_UNIX = 1;
    static final int SOCK_STREAM = 1;
    static final int SO_PEERCRED = 17;
    static final int SO_RCVTIMEO = 20;
    /** struct timeval (LP64): seconds, microseconds. */
    static final long TIMEVAL_LENGTH = 16;
    static final int SCM_RIGHTS = 1;
    static final int MSG_CTRUNC = 0x8;
    static final int MSG_CMSG_CLOEXEC = 0x40000000;

    /** struct sockaddr_un: sa_family_t (2 bytes), then sun_path[108], NUL-terminated here. */
    static final int SUN_PATH_OFFSET = 2;
    static final int SUN_PATH_LENGTH = 108;
    static final int SOCKADDR_UN_LENGTH = SUN_PATH_OFFSET + SUN_PATH_LENGTH;

    /** struct msghdr (LP64): name, namelen (+pad), iov, iovlen, control, controllen, flags (+pad). */
    static final long MSG_IOV_OFFSET = 16;
    static final long MSG_IOVLEN_OFFSET = 24;
    static final long MSG_CONTROL_OFFSET = 32;
    static final long MSG_CONTROLLEN_OFFSET = 40;
    static final long MSG_FLAGS_OFFSET = 48;
    static final long MSGHDR_LENGTH = 56;

    /** struct iovec: base, len. */
    static final long IOVEC_LENGTH = 16;

    /** struct cmsghdr (LP64): len (size_t), level, type, then the data, 8-byte aligned. */
    static final long CMSG_LEVEL_OFFSET = 8;
    static final long CMSG_TYPE_OFFSET = 12;
    static final long CMSG_DATA_OFFSET = 16;

    /** struct ucred: pid, uid, gid. */
    static final long UCRED_UID_OFFSET = 4;
    static final long UCRED_LENGTH = 12;

    /** Descriptors one read accepts: room for this many in the control buffer (more arrive truncated and fail it). */
    static final int MAX_FDS = 8;
    private static final long CONTROL_LENGTH = CMSG_DATA_OFFSET + 4L * MAX_FDS;

    private static final int BACKLOG = 16;
    private static final int SHUT_RDWR = 2;

    private final Path path;
    private final int fd;
    /** The accepting thread's errno state: freed by the GC, as a thread may still be in accept when we close. */
    private final MemorySegment errnoState = Libc.allocateErrnoState(Arena.ofAuto());
    private volatile boolean closed;

    private UnixFdListener(final Path path, final int fd)
    {
        this.path = path;
        this.fd = fd;
    }

    /**
     * Bind an owner-only socket at {@code path} and listen.
     *
     * @throws IOException if the path is too long, already there, or the socket cannot be made.
     */
    public static UnixFdListener open(final Path path) throws IOException
    {
        final byte[] name = path.toAbsolutePath().toString().getBytes(StandardCharsets.UTF_8);
        if (name.length >= SUN_PATH_LENGTH)
        {
            throw new IOException(path + ": a Unix socket's path must be shorter than " + SUN_PATH_LENGTH + " bytes");
        }
        if (Files.exists(path))
        {
            throw new IOException(path + ": a file is already there (another agent?)");
        }
        final UnixFdListener listener;
        try (Arena call = Arena.ofConfined())
        {
            final MemorySegment errno = Libc.allocateErrnoState(call);
            final int fd = Libc.socket(errno, AF_UNIX, SOCK_STREAM | LinuxPacketAbi.SOCK_CLOEXEC, 0);
            if (fd < 0)
            {
                throw new IOException("socket(AF_UNIX) failed: " + Libc.strerror(Libc.errno(errno)));
            }
            final MemorySegment address = call.allocate(SOCKADDR_UN_LENGTH);
            address.set(ValueLayout.JAVA_SHORT, 0, (short)AF_UNIX);
            MemorySegment.copy(name, 0, address, ValueLayout.JAVA_BYTE, SUN_PATH_OFFSET, name.length);
            if (Libc.bind(errno, fd, address, SOCKADDR_UN_LENGTH) < 0 || Libc.listen(errno, fd, BACKLOG) < 0)
            {
                final String error = Libc.strerror(Libc.errno(errno));
                Libc.close(errno, fd);
                throw new IOException("cannot listen on " + path + ": " + error);
            }
            listener = new UnixFdListener(path, fd);
        }
        try
        {
            Files.setPosixFilePermissions(path, PosixFilePermissions.fromString("rw-------"));
        }
        catch (final IOException ex)
        {
            listener.close();
            throw ex;
        }
        return listener;
    }

    /**
     * @return the socket's path.
     */
    public Path path()
    {
        return path;
    }

    /**
     * Wait for the next connection.
     *
     * @throws IOException if the listener was closed or accept failed.
     */
    public Connection accept() throws IOException
    {
        while (true)
        {
            final int client = Libc.accept4(errnoState, fd, LinuxPacketAbi.SOCK_CLOEXEC);
            if (client >= 0)
            {
                return new Connection(client);
            }
            final int errno = Libc.errno(errnoState);
            if (closed)
            {
                throw new IOException(path + ": closed");
            }
            if (errno != LinuxPacketAbi.EINTR && errno != LinuxPacketAbi.ECONNABORTED)
            {
                throw new IOException("accept on " + path + " failed: " + Libc.strerror(errno));
            }
        }
    }


    /**
     * Stop listening and remove the socket file. A thread blocked in {@link #accept()} returns with an error.
     */
    @Override
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        try (Arena call = Arena.ofConfined())
        {
            final MemorySegment errno = Libc.allocateErrnoState(call);
            // shutdown wakes a thread blocked in accept; close alone does not on Linux
            Libc.shutdown(errno, fd, SHUT_RDWR);
            Libc.close(errno, fd);
        }
        try
        {
            Files.deleteIfExists(path);
        }
        catch (final IOException ignored)
        {
            // the file is gone or not ours to remove: nothing more to do
        }
    }

    /**
     * A line and the descriptors that came with its bytes.
     *
     * @param text the line, without its newline.
     * @param fds  descriptors now open in this process (close-on-exec), in the order sent; the reader owns them.
     */
    public record Line(String text, int[] fds)
    {
    }

    /**
     * One accepted connection.
     */
    public static final class Connection implements AutoCloseable
    {
        private final int fd;
        private boolean closed;

        private Connection(final int fd)
        {
            this.fd = fd;
        }

        /**
         * @return the connecting process's user id, as the kernel recorded it at connect ({@code SO_PEERCRED}).
         * @throws IOException if the kernel will not say.
         */
        public int peerUid() throws IOException
        {
            try (Arena call = Arena.ofConfined())
            {
                final MemorySegment errno = Libc.allocateErrnoState(call);
                final MemorySegment credentials = call.allocate(UCRED_LENGTH, 4);
                final MemorySegment length = call.allocate(ValueLayout.JAVA_INT);
                length.set(ValueLayout.JAVA_INT, 0, (int)UCRED_LENGTH);
                if (Libc.getsockopt(errno, fd, SOL_SOCKET, SO_PEERCRED, credentials, length) < 0)
                {
                    throw new IOException("SO_PEERCRED: " + Libc.strerror(Libc.errno(errno)));
                }
                return credentials.get(ValueLayout.JAVA_INT, UCRED_UID_OFFSET);
            }
        }

        /**
         * Read up to the first newline: the line and every descriptor that came with it. Nothing may follow the
         * newline (one request, then this side answers).
         *
         * @param maxBytes      longest line accepted.
         * @param timeoutMillis longest wait for any one piece of the line (a peer that connects and sends nothing
         *                      must not hold a thread for ever).
         * @throws IOException if the peer closed first, sent more than {@code maxBytes}, more than {@link #MAX_FDS}
         *                     descriptors, or bytes after the newline, or was silent for {@code timeoutMillis};
         *                     descriptors received by then are closed.
         */
        public Line readLine(final int maxBytes, final long timeoutMillis) throws IOException
        {
            int[] fds = new int[0];
            try (Arena call = Arena.ofConfined())
            {
                final MemorySegment errno = Libc.allocateErrnoState(call);
                final MemorySegment timeout = call.allocate(TIMEVAL_LENGTH, 8);
                timeout.set(ValueLayout.JAVA_LONG, 0, timeoutMillis / 1000);
                timeout.set(ValueLayout.JAVA_LONG, 8, (timeoutMillis % 1000) * 1000);
                if (Libc.setsockopt(errno, fd, SOL_SOCKET, SO_RCVTIMEO, timeout, (int)TIMEVAL_LENGTH) < 0)
                {
                    throw new IOException("SO_RCVTIMEO: " + Libc.strerror(Libc.errno(errno)));
                }
                final MemorySegment buffer = call.allocate(maxBytes + 1L);
                final MemorySegment iov = call.allocate(IOVEC_LENGTH, 8);
                final MemorySegment control = call.allocate(CONTROL_LENGTH, 8);
                final MemorySegment message = call.allocate(MSGHDR_LENGTH, 8);
                long filled = 0;
                while (true)
                {
                    iov.set(ValueLayout.ADDRESS, 0, buffer.asSlice(filled));
                    iov.set(ValueLayout.JAVA_LONG, 8, maxBytes + 1L - filled);
                    message.fill((byte)0);
                    message.set(ValueLayout.ADDRESS, MSG_IOV_OFFSET, iov);
                    message.set(ValueLayout.JAVA_LONG, MSG_IOVLEN_OFFSET, 1L);
                    message.set(ValueLayout.ADDRESS, MSG_CONTROL_OFFSET, control);
                    message.set(ValueLayout.JAVA_LONG, MSG_CONTROLLEN_OFFSET, CONTROL_LENGTH);
                    final long read = Libc.recvmsg(errno, fd, message, MSG_CMSG_CLOEXEC);
                    if (read < 0)
                    {
                        final int error = Libc.errno(errno);
                        if (error == LinuxPacketAbi.EINTR)
                        {
                            continue;
                        }
                        throw failed(fds, error == LinuxPacketAbi.EAGAIN ?
                            "nothing for " + timeoutMillis + " ms" : "recvmsg: " + Libc.strerror(error));
                    }
                    fds = appendRights(fds, message, control);
                    if ((message.get(ValueLayout.JAVA_INT, MSG_FLAGS_OFFSET) & MSG_CTRUNC) != 0)
                    {
                        throw failed(fds, "more than " + MAX_FDS + " descriptors sent");
                    }
                    if (read == 0)
                    {
                        throw failed(fds, "the peer closed before a whole line");
                    }
                    final long start = filled;
                    filled += read;
                    for (long i = start; i < filled; i++)
                    {
                        if (buffer.get(ValueLayout.JAVA_BYTE, i) == '\n')
                        {
                            if (i != filled - 1)
                            {
                                throw failed(fds, "bytes after the line");
                            }
                            final byte[] text = buffer.asSlice(0, i).toArray(ValueLayout.JAVA_BYTE);
                            return new Line(new String(text, StandardCharsets.UTF_8), fds);
                        }
                    }
                    if (filled > maxBytes)
                    {
                        throw failed(fds, "a line longer than " + maxBytes + " bytes");
                    }
                }
            }
        }

        private static int[] appendRights(final int[] fds, final MemorySegment message, final MemorySegment control)
        {
            final long controlLength = message.get(ValueLayout.JAVA_LONG, MSG_CONTROLLEN_OFFSET);
            int[] all = fds;
            long at = 0;
            while (at + CMSG_DATA_OFFSET <= controlLength)
            {
                final long length = control.get(ValueLayout.JAVA_LONG, at);
                if (length < CMSG_DATA_OFFSET || at + length > controlLength)
                {
                    break;
                }
                if (control.get(ValueLayout.JAVA_INT, at + CMSG_LEVEL_OFFSET) == SOL_SOCKET &&
                    control.get(ValueLayout.JAVA_INT, at + CMSG_TYPE_OFFSET) == SCM_RIGHTS)
                {
                    final int count = (int)((length - CMSG_DATA_OFFSET) / 4);
                    final int from = all.length;
                    all = Arrays.copyOf(all, from + count);
                    for (int i = 0; i < count; i++)
                    {
                        all[from + i] = control.get(ValueLayout.JAVA_INT, at + CMSG_DATA_OFFSET + 4L * i);
                    }
                }
                at += (length + 7) & ~7L;
            }
            return all;
        }

        private static IOException failed(final int[] fds, final String why)
        {
            closeAll(fds);
            return new IOException(why);
        }

        /**
         * Close descriptors this process received and will not use.
         */
        public static void closeAll(final int[] fds)
        {
            try (Arena call = Arena.ofConfined())
            {
                final MemorySegment errno = Libc.allocateErrnoState(call);
                for (final int received : fds)
                {
                    Libc.close(errno, received);
                }
            }
        }

        /**
         * Write {@code text} whole.
         *
         * @throws IOException if the peer is gone.
         */
        public void write(final String text) throws IOException
        {
            final byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
            try (Arena call = Arena.ofConfined())
            {
                final MemorySegment errno = Libc.allocateErrnoState(call);
                final MemorySegment buffer = call.allocate(Math.max(1, bytes.length));
                MemorySegment.copy(bytes, 0, buffer, ValueLayout.JAVA_BYTE, 0, bytes.length);
                long done = 0;
                while (done < bytes.length)
                {
                    final long wrote = Libc.write(errno, fd, buffer.asSlice(done), bytes.length - done);
                    if (wrote < 0)
                    {
                        final int error = Libc.errno(errno);
                        if (error == LinuxPacketAbi.EINTR)
                        {
                            continue;
                        }
                        throw new IOException("write: " + Libc.strerror(error));
                    }
                    done += wrote;
                }
            }
        }

        /**
         * Close the connection; again does nothing (the descriptor's number may be another's by then).
         */
        @Override
        public synchronized void close()
        {
            if (closed)
            {
                return;
            }
            closed = true;
            try (Arena call = Arena.ofConfined())
            {
                Libc.close(Libc.allocateErrnoState(call), fd);
            }
        }
    }
}
