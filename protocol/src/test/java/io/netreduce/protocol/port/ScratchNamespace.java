package io.netreduce.protocol.port;

import java.util.function.Supplier;

/**
 * Test fixture: a fresh network namespace, its loopback interface down as a new namespace's is, for code that must
 * cope with that. Closing deletes it. Needs root.
 */
public final class ScratchNamespace implements AutoCloseable
{
    private final String name;

    /**
     * @param tag a short word for the test, in the namespace's name ({@code nrt-TAG-PID}).
     */
    public ScratchNamespace(final String tag)
    {
        name = "nrt-" + tag + "-" + ProcessHandle.current().pid();
        VethPair.run("ip", "netns", "add", name);
    }

    /**
     * @return the result of {@code task}, run on a thread inside the namespace.
     */
    public <T> T call(final Supplier<T> task)
    {
        return NetworkNamespace.callIn(name, task);
    }

    @Override
    public void close()
    {
        VethPair.run("ip", "netns", "delete", name);
    }
}
