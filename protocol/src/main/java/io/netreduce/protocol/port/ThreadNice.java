package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The calling thread's nice value (setpriority(2) on its own task id), for the threads that carry packets: a
 * worker's RC endpoint and the appliance's lanes.
 * <p>
 * Why: on a host whose cores are busy with other work (the trainer), a thread that blocks in poll(2) between frames
 * is woken by each frame but then waits for the scheduler to give it a core. The fair scheduler (EEVDF) lets a
 * woken thread of equal weight wait behind a busy one for milliseconds, and a NetReduce ring stalls on its slowest
 * rank. A lower nice value gives the packet thread more weight, so a frame's wake-up runs it at once, while it still
 * takes only the CPU its packets need (it blocks again when they are done). gloo's counterpart of this work is
 * the kernel's TCP receive path, which runs in softirq context ahead of every thread. Measured on the test bed:
 * docs/performance.md ("Packet threads ahead of the trainer").
 * <p>
 * Lowering the nice value below the thread's current one needs CAP_SYS_NICE or a matching RLIMIT_NICE
 * ({@code ulimit -e}); {@link #applyToCurrentThread(int)} reports a refusal instead of throwing, so a caller can say so
 * and go on at the old value.
 */
public final class ThreadNice
{
    /** The highest priority a nice value can give. */
    public static final int MIN_NICE = -20;
    /** The lowest priority a nice value can give. */
    public static final int MAX_NICE = 19;

    private static final int PRIO_PROCESS = 0;

    private ThreadNice()
    {
    }

    /**
     * @param nice the value to check.
     * @return {@code nice}.
     * @throws IllegalArgumentException unless it is in {@link #MIN_NICE}..{@link #MAX_NICE}.
     */
    public static int validate(final int nice)
    {
        if (nice < MIN_NICE || nice > MAX_NICE)
        {
            throw new IllegalArgumentException("nice must be " + MIN_NICE + ".." + MAX_NICE + ": " + nice);
        }
        return nice;
    }

    /**
     * Set the calling thread's nice value; the process's other threads keep theirs.
     *
     * @param nice the value, {@link #MIN_NICE}..{@link #MAX_NICE}.
     * @return null when set, else why not (the kernel's refusal and what would allow it).
     * @throws IllegalArgumentException for a value out of range.
     */
    public static String applyToCurrentThread(final int nice)
    {
        validate(nice);
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment errnoState = Libc.allocateErrnoState(arena);
            final int tid = Libc.gettid();
            if (Libc.setpriority(errnoState, PRIO_PROCESS, tid, nice) == 0)
            {
                return null;
            }
            final int errno = Libc.errno(errnoState);
            return "setpriority(thread " + tid + ", nice " + nice + "): " + Libc.strerror(errno) +
                (nice < 0 ? " (a negative nice value needs CAP_SYS_NICE or RLIMIT_NICE, ulimit -e)" : "");
        }
    }
}
