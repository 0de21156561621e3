package io.netreduce.protocol.port;

import java.lang.management.ManagementFactory;

/**
 * Measures heap allocation by the calling thread, to pin that hot paths are allocation-free once compiled.
 * Interpreted code (FFM downcalls in particular) may allocate while the JIT catches up, so the probe runs windows
 * until one allocates nothing.
 */
final class AllocationProbe
{
    private AllocationProbe()
    {
    }

    /**
     * Run {@code action} in windows of {@code iterations} calls until a window allocates nothing.
     *
     * @return the number of windows run, the last allocation-free; or -1 if none of {@code maxWindows} was.
     */
    static int roundsUntilAllocationFree(final Runnable action, final int iterations, final int maxWindows)
    {
        final com.sun.management.ThreadMXBean threads =
            (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
        for (int window = 1; window <= maxWindows; window++)
        {
            final long before = threads.getCurrentThreadAllocatedBytes();
            for (int i = 0; i < iterations; i++)
            {
                action.run();
            }
            if (threads.getCurrentThreadAllocatedBytes() == before)
            {
                return window;
            }
        }
        return -1;
    }
}
