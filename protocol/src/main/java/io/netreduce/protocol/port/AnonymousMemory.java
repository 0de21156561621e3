package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static io.netreduce.protocol.port.LinuxPacketAbi.MAP_ANONYMOUS;
import static io.netreduce.protocol.port.LinuxPacketAbi.MAP_FAILED;
import static io.netreduce.protocol.port.LinuxPacketAbi.MAP_POPULATE;
import static io.netreduce.protocol.port.LinuxPacketAbi.MAP_PRIVATE;
import static io.netreduce.protocol.port.LinuxPacketAbi.PROT_READ;
import static io.netreduce.protocol.port.LinuxPacketAbi.PROT_WRITE;

/**
 * Memory mapped from the kernel for one owner and unmapped when it closes: large, long-lived blocks whose return to
 * the system must be exact (a ring's aggregator region, megabytes, added and removed over a daemon's life).
 * <p>
 * Why not {@code Arena.allocate}: that is {@code malloc}, and glibc serves a block of a size it has freed before from
 * a thread's arena once its dynamic mmap threshold has risen past it. Freed, the block stays in that arena, resident
 * until a trim and fragmented by whatever small allocation lands beside it; the 30-minute soak, adding and removing
 * jobs on the API's and the reloads' threads, saw the daemon's anonymous RSS creep by megabytes an hour in a
 * glibc arena while every tracked allocation was flat. Mapped, a block is gone from the process at {@link #close}.
 * It is populated at once ({@code MAP_POPULATE}: the kernel's zeroed pages, resident from the start, as the zeroed
 * malloc'd block was), so the packet path that later writes it takes no page fault.
 * <p>
 * The segment lives in a shared {@link Arena}: closing it unmaps the block, and any access through the segment after
 * that throws instead of reading unmapped memory. Raw addresses taken from it (an {@code UnsafeBuffer}) are the
 * owner's to stop using first, as with any off-heap block.
 */
public final class AnonymousMemory implements AutoCloseable
{
    private final Arena arena;
    private final MemorySegment segment;

    private AnonymousMemory(final Arena arena, final MemorySegment segment)
    {
        this.arena = arena;
        this.segment = segment;
    }

    /**
     * @param bytes the block's length, at least 1; rounded up to whole pages by the kernel.
     * @return a mapped, zero-filled block, page-aligned.
     * @throws OutOfMemoryError when the kernel refuses the mapping.
     */
    public static AnonymousMemory map(final long bytes)
    {
        if (bytes < 1)
        {
            throw new IllegalArgumentException("bytes must be positive: " + bytes);
        }
        final Arena arena = Arena.ofShared();
        try
        {
            final MemorySegment errnoState = Libc.allocateErrnoState(arena);
            final MemorySegment mapped = Libc.mmap(errnoState, bytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1);
            if (mapped.address() == MAP_FAILED)
            {
                final int errno = Libc.errno(errnoState);
                throw new OutOfMemoryError("mmap of " + bytes + " bytes: " + Libc.strerror(errno) + " (errno " +
                    errno + ")");
            }
            final long address = mapped.address();
            final MemorySegment segment = MemorySegment.ofAddress(address).reinterpret(bytes, arena,
                ignored -> unmap(address, bytes));
            return new AnonymousMemory(arena, segment);
        }
        catch (final RuntimeException | Error ex)
        {
            arena.close();
            throw ex;
        }
    }

    private static void unmap(final long address, final long bytes)
    {
        try (Arena scratch = Arena.ofConfined())
        {
            Libc.munmap(Libc.allocateErrnoState(scratch), MemorySegment.ofAddress(address), bytes);
        }
    }

    /**
     * @return the block; valid until {@link #close}.
     */
    public MemorySegment segment()
    {
        return segment;
    }

    /**
     * @return whether the block is still mapped.
     */
    public boolean isMapped()
    {
        return arena.scope().isAlive();
    }

    /**
     * Unmap the block; idempotent.
     */
    @Override
    public void close()
    {
        if (arena.scope().isAlive())
        {
            arena.close();
        }
    }
}
