package io.netreduce.dataplane.agent;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.locks.LockSupport;

/**
 * How busy the JVM's JIT compilers are, from their threads' CPU time in {@code /proc/self/task} (HotSpot names them
 * "C1 CompilerThreadN" and "C2 CompilerThreadN", which the kernel keeps as "C1 CompilerThre"). The JVM's own
 * {@code CompilationMXBean} adds a compilation's time only when it ends, so a long C2 compilation looks like a quiet
 * compiler while it runs; the threads' CPU does not. For the warm-up, at start only: it reads a file per thread.
 */
final class CompilerActivity
{
    /** Sampling interval while waiting for the compilers to go quiet: the kernel counts CPU time in 10 ms ticks. */
    private static final long POLL_NS = 10_000_000L;
    private static final Path TASKS = Path.of("/proc/self/task");
    /** utime and stime are the 14th and 15th fields of {@code stat}: the 12th and 13th after the comm's ')'. */
    private static final int UTIME_AFTER_COMM = 11;

    private CompilerActivity()
    {
    }

    /**
     * @return the CPU time, in clock ticks, that the JIT compiler threads have used so far; -1 where it cannot be
     *         read (not Linux, no procfs).
     */
    static long cpuTicks()
    {
        long ticks = 0;
        boolean found = false;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(TASKS))
        {
            for (final Path task : tasks)
            {
                final long threadTicks = compilerThreadTicks(task);
                if (threadTicks >= 0)
                {
                    ticks += threadTicks;
                    found = true;
                }
            }
        }
        catch (final IOException | SecurityException ex)
        {
            return -1;
        }
        return found ? ticks : -1;
    }

    /**
     * Wait until the compiler threads have used no CPU for {@code quietNanos}, or until {@code deadlineNs}.
     *
     * @return their CPU time so far ({@link #cpuTicks()}) once they went quiet; -1 at the deadline, or where their
     *         time cannot be read.
     */
    static long awaitQuiet(final long quietNanos, final long deadlineNs)
    {
        long last = cpuTicks();
        if (last < 0)
        {
            return -1;
        }
        long quietSinceNs = System.nanoTime();
        while (System.nanoTime() - deadlineNs < 0)
        {
            LockSupport.parkNanos(POLL_NS);
            final long now = cpuTicks();
            if (now != last)
            {
                last = now;
                quietSinceNs = System.nanoTime();
            }
            else if (System.nanoTime() - quietSinceNs >= quietNanos)
            {
                return last;
            }
        }
        return -1;
    }

    private static long compilerThreadTicks(final Path task)
    {
        try
        {
            final String comm = Files.readString(task.resolve("comm"), StandardCharsets.US_ASCII);
            if (!comm.startsWith("C1 Compiler") && !comm.startsWith("C2 Compiler"))
            {
                return -1;
            }
            final String stat = Files.readString(task.resolve("stat"), StandardCharsets.US_ASCII);
            final String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return Long.parseLong(fields[UTIME_AFTER_COMM]) + Long.parseLong(fields[UTIME_AFTER_COMM + 1]);
        }
        catch (final IOException | RuntimeException ex)
        {
            return -1; // the thread ended meanwhile, or a format this does not know: not counted
        }
    }
}
