package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

/**
 * Moves a thread into a named network namespace (one made by {@code ip netns add NAME}), for tests and tools
 * that open ports or sockets in a namespace other than the JVM's.
 * <p>
 * Namespace membership is per OS thread, and a socket belongs for life to the namespace that was current when it
 * was created. So a port (or a Java NIO socket) opened by a thread inside a namespace keeps working there when
 * later used from any other thread. {@link #callIn} is the convenient form: it runs a task on a fresh platform
 * thread that enters the namespace and then ends, leaving the JVM's own threads untouched.
 * <p>
 * Needs CAP_SYS_ADMIN. A daemon that runs wholly in one namespace should instead be started with
 * {@code ip netns exec NAME java ...}.
 */
public final class NetworkNamespace
{
    /** Where {@code ip netns} keeps the bind mounts that name namespaces. */
    public static final String NETNS_RUN_DIR = "/var/run/netns/";

    private NetworkNamespace()
    {
    }

    /**
     * Move the calling thread into the namespace {@code name} for the rest of its life.
     *
     * @throws IllegalStateException if called on a virtual thread (it could move between OS threads).
     * @throws PortException         if the namespace cannot be opened or entered, with the errno text.
     */
    public static void enter(final String name)
    {
        if (Thread.currentThread().isVirtual())
        {
            throw new IllegalStateException("a virtual thread cannot enter a network namespace");
        }
        if (name.isEmpty() || name.contains("/"))
        {
            throw new IllegalArgumentException("not a namespace name: '" + name + "'");
        }

        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment errnoState = Libc.allocateErrnoState(arena);
            final String path = NETNS_RUN_DIR + name;
            final int fd = Libc.open(errnoState, arena.allocateFrom(path), LinuxPacketAbi.O_RDONLY | LinuxPacketAbi.O_CLOEXEC);
            if (fd < 0)
            {
                throw new PortException("open network namespace " + path, Libc.errno(errnoState));
            }
            try
            {
                if (Libc.setns(errnoState, fd, LinuxPacketAbi.CLONE_NEWNET) < 0)
                {
                    throw new PortException("setns into network namespace " + name, Libc.errno(errnoState));
                }
            }
            finally
            {
                Libc.close(errnoState, fd);
            }
        }
    }

    /**
     * Run {@code task} on a new platform thread that first enters the namespace {@code name}; wait for it and
     * return its result. Exceptions thrown by the task (or by entering) are rethrown here.
     */
    public static <T> T callIn(final String name, final Supplier<T> task)
    {
        final AtomicReference<T> result = new AtomicReference<>();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final Thread thread = Thread.ofPlatform().name("netns-" + name).unstarted(() ->
        {
            try
            {
                enter(name);
                result.set(task.get());
            }
            catch (final Throwable t)
            {
                failure.set(t);
            }
        });
        thread.start();
        try
        {
            thread.join();
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted waiting for the namespace thread", ex);
        }

        final Throwable t = failure.get();
        if (t instanceof RuntimeException runtime)
        {
            throw runtime;
        }
        if (t instanceof Error error)
        {
            throw error;
        }
        if (null != t)
        {
            throw new IllegalStateException(t);
        }
        return result.get();
    }

    /**
     * {@link #callIn} for a task without a result.
     */
    public static void runIn(final String name, final Runnable task)
    {
        callIn(name, () ->
        {
            task.run();
            return null;
        });
    }
}
