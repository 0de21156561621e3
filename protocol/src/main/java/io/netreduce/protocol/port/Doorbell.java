package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A wake-up for a thread that blocks in {@code poll(2)} on its ports ({@link PortPoller}): a Linux
 * {@code eventfd(2)} in the poller's descriptor set. Another thread that hands it work (a command, a request from a
 * trainer) rings it, and the blocked thread wakes at once instead of at its next timeout. So a loop can block for
 * long stretches (costing its host nothing while idle) and still answer new work within microseconds.
 * <p>
 * {@link #ring()} may be called from any thread; {@link #drain()} only by the thread that polls.
 */
public final class Doorbell implements AutoCloseable
{
    private static final int EFD_NONBLOCK = 0x800;
    private static final int EFD_CLOEXEC = 0x80000;
    private static final int EAGAIN = 11;
    private static final long O_NONBLOCK = 0x800;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment ringValue;
    private final MemorySegment drainValue;
    private final MemorySegment ringErrno;
    private final MemorySegment drainErrno;
    private final int fd;
    private volatile boolean closed;

    public Doorbell()
    {
        this(-1);
    }

    private Doorbell(final int inherited)
    {
        ringValue = arena.allocate(ValueLayout.JAVA_LONG);
        ringValue.set(ValueLayout.JAVA_LONG, 0, 1L);
        drainValue = arena.allocate(ValueLayout.JAVA_LONG);
        ringErrno = Libc.allocateErrnoState(arena);
        drainErrno = Libc.allocateErrnoState(arena);
        fd = inherited >= 0 ? inherited : Libc.eventfd(ringErrno, 0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0)
        {
            final int errno = Libc.errno(ringErrno);
            arena.close();
            throw new PortException("eventfd failed: " + Libc.strerror(errno));
        }
    }

    /**
     * A doorbell on an eventfd this process inherited (a trainer that started it made the eventfd, non-blocking, and
     * rings it itself, so its request wakes the polling thread with no thread of this process in between). Closed
     * with the doorbell.
     *
     * @param fd the inherited descriptor.
     * @return the doorbell.
     * @throws IllegalArgumentException if {@code fd} is not an open eventfd of this process.
     */
    public static Doorbell adopt(final int fd)
    {
        final String target;
        try
        {
            target = Files.readSymbolicLink(Path.of("/proc/self/fd/" + fd)).toString();
        }
        catch (final IOException | UnsupportedOperationException ex)
        {
            throw new IllegalArgumentException("descriptor " + fd + " is not open in this process", ex);
        }
        if (!"anon_inode:[eventfd]".equals(target))
        {
            throw new IllegalArgumentException("descriptor " + fd + " is not an eventfd: " + target);
        }
        // drain() must not block: the open file's flags (shared with whoever made it) need O_NONBLOCK.
        final long flags;
        try
        {
            flags = Files.readAllLines(Path.of("/proc/self/fdinfo/" + fd)).stream()
                .filter(line -> line.startsWith("flags:"))
                .mapToLong(line -> Long.parseLong(line.substring("flags:".length()).trim(), 8))
                .findFirst().orElse(0);
        }
        catch (final IOException | NumberFormatException ex)
        {
            throw new IllegalArgumentException("descriptor " + fd + ": cannot read its flags: " + ex.getMessage(), ex);
        }
        if ((flags & O_NONBLOCK) == 0)
        {
            throw new IllegalArgumentException("eventfd " + fd + " is blocking (make it with EFD_NONBLOCK)");
        }
        return new Doorbell(fd);
    }

    /**
     * @return the descriptor a poller waits on.
     */
    int fd()
    {
        return fd;
    }

    /**
     * Wake the polling thread (or make its next poll return at once). Safe from any thread; a ring after
     * {@link #close()} is ignored.
     */
    public synchronized void ring()
    {
        // synchronized: the value segment and errno state are shared by ringing threads (rare: a control path).
        if (!closed)
        {
            Libc.write(ringErrno, fd, ringValue, Long.BYTES);
        }
    }

    /**
     * Reset the doorbell after waking (the polling thread, before it looks for the work it was woken for).
     *
     * @return true if it had been rung since the last drain.
     */
    public boolean drain()
    {
        final long read = Libc.read(drainErrno, fd, drainValue, Long.BYTES);
        if (read < 0 && Libc.errno(drainErrno) != EAGAIN)
        {
            throw new PortException("eventfd read failed: " + Libc.strerror(Libc.errno(drainErrno)));
        }
        return read == Long.BYTES;
    }

    @Override
    public synchronized void close()
    {
        if (!closed)
        {
            closed = true;
            Libc.close(ringErrno, fd);
            arena.close();
        }
    }
}
