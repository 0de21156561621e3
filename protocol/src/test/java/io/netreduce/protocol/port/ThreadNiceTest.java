package io.netreduce.protocol.port;

import org.junit.jupiter.api.Test;

import io.netreduce.protocol.support.ProcStat;

import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ThreadNiceTest
{
    @Test
    void shouldSetTheCallingThreadsNiceValueAndLeaveTheProcesssOtherThreadsAlone() throws Exception
    {
        final int before = niceOf(Libc.gettid());
        final AtomicReference<String> refusal = new AtomicReference<>("not run");
        final int[] tid = new int[1];
        final int[] seen = new int[1];
        final Thread thread = Thread.ofPlatform().start(() ->
        {
            tid[0] = Libc.gettid();
            // Raising the nice value (lowering the priority) needs no privilege.
            refusal.set(ThreadNice.applyToCurrentThread(7));
            seen[0] = niceOf(tid[0]);
        });
        thread.join();

        assertThat(refusal.get()).isNull();
        assertThat(seen[0]).isEqualTo(7);
        assertThat(niceOf(Libc.gettid())).isEqualTo(before);
    }

    @Test
    void shouldSayWhatIsMissingWhenTheKernelRefusesAHigherPriority() throws Exception
    {
        final AtomicReference<String> refusal = new AtomicReference<>("not run");
        final int[] seen = new int[1];
        final Thread thread = Thread.ofPlatform().start(() ->
        {
            refusal.set(ThreadNice.applyToCurrentThread(-5));
            seen[0] = niceOf(Libc.gettid());
        });
        thread.join();

        // Root (CI) may lower it; anyone else is refused, and told what would allow it.
        if (refusal.get() == null)
        {
            assertThat(seen[0]).isEqualTo(-5);
        }
        else
        {
            assertThat(refusal.get()).contains("CAP_SYS_NICE");
        }
    }

    @Test
    void shouldRejectANiceValueOutOfRange()
    {
        assertThatThrownBy(() -> ThreadNice.applyToCurrentThread(-21)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> ThreadNice.applyToCurrentThread(20)).isInstanceOf(IllegalArgumentException.class);
    }

    private static int niceOf(final int tid)
    {
        return ProcStat.nice(Path.of("/proc/self/task/" + tid));
    }
}
