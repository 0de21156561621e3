package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

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

    private final Arena arena = Arena.ofShared();
    private final MemorySegment ringValue;
    private final MemorySegment drainValue;
    private final MemorySegment ringErrno;
    private final MemorySegment drainErrno;
    private final int fd;
    private volatile boolean closed;

    public Doorbell()
    {
        ringValue = arena.allocate(ValueLayout.JAVA_LONG);
        ringValue.set(ValueLayout.JAVA_LONG, 0, 1L);
        drainValue = arena.allocate(ValueLayout.JAVA_LONG);
        ringErrno = Libc.allocateErrnoState(arena);
        drainErrno = Libc.allocateErrnoState(arena);
        fd = Libc.eventfd(ringErrno, 0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0)
        {
            final int errno = Libc.errno(ringErrno);
            arena.close();
            throw new PortException("eventfd failed: " + Libc.strerror(errno));
        }
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
