package io.netreduce.worker;

import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * Runs the benchmark's own work between calls (filling the next input, checking a result against a reference sum
 * recomputed from every rank's pattern: 64 MiB of scalar work) on a thread at the process's nice value, while the
 * endpoint's thread waits: at --endpoint-nice it would take the trainer's CPU for work a trainer does not do.
 */
final class OffEndpointThread
{
    /** Its thread keeps the process's nice value. */
    private final ExecutorService checker = Executors.newSingleThreadExecutor(
        Thread.ofPlatform().daemon().name("allreduce-check").factory());

    /**
     * @return what {@code work} returned, once it has run on the thread.
     */
    <T> T call(final Callable<T> work)
    {
        try
        {
            return checker.submit(work).get();
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", ex);
        }
        catch (final ExecutionException ex)
        {
            throw ex.getCause() instanceof RuntimeException runtime ? runtime :
                new IllegalStateException(ex.getCause());
        }
    }

    void run(final Runnable work)
    {
        call(() ->
        {
            work.run();
            return null;
        });
    }
}
