package io.netreduce.protocol.port;

import org.junit.jupiter.api.Test;

import io.netreduce.protocol.support.ProcStat;

import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ThreadNiceTest
{
    @Test
    void shouldSetTheCallingThreadsNiceValueAndLeaveTheProcesssOtherThreadsAlone() throws Exception
    {
        final int before = niceOf(ThreadNice.currentThreadId());
        final AtomicReference<String> refusal = new AtomicReference<>("not run");
        final int[] tid = new int[1];
        final int[] seen = new int[1];
        final Thread thread = Thread.ofPlatform().start(() ->
        {
            tid[0] = ThreadNice.currentThreadId();
            // Raising the nice value (lowering the priority) needs no privilege.
            refusal.set(ThreadNice.applyToCurrentThread(7));
            seen[0] = niceOf(tid[0]);
        });
        thread.join();

        assertNull(refusal.get());
        assertEquals(7, seen[0]);
        assertEquals(before, niceOf(ThreadNice.currentThreadId()));
    }

    @Test
    void shouldSayWhatIsMissingWhenTheKernelRefusesAHigherPriority() throws Exception
    {
        final AtomicReference<String> refusal = new AtomicReference<>("not run");
        final int[] seen = new int[1];
        final Thread thread = Thread.ofPlatform().start(() ->
        {
            refusal.set(ThreadNice.applyToCurrentThread(-5));
            seen[0] = niceOf(ThreadNice.currentThreadId());
        });
        thread.join();

        // Root (CI) may lower it; anyone else is refused, and told what would allow it.
        if (refusal.get() == null)
        {
            assertEquals(-5, seen[0]);
        }
        else
        {
            assertTrue(refusal.get().contains("CAP_SYS_NICE"), refusal.get());
        }
    }

    @Test
    void shouldRejectANiceValueOutOfRange()
    {
        assertThrows(IllegalArgumentException.class, () -> ThreadNice.applyToCurrentThread(-21));
        assertThrows(IllegalArgumentException.class, () -> ThreadNice.applyToCurrentThread(20));
    }

    private static int niceOf(final int tid)
    {
        return ProcStat.nice(Path.of("/proc/self/task/" + tid));
    }
}
