package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Downcalls into the C library through the FFM API, for the packet socket and namespace code of this package.
 * <p>
 * Calls that can fail take an {@code errnoState} segment first (allocated with {@link #allocateErrnoState(Arena)})
 * into which the linker captures {@code errno} immediately after the call, before the JVM can disturb it; read it
 * with {@link #errno(MemorySegment)}. Each thread calling concurrently needs its own state segment.
 */
final class Libc
{
    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LOOKUP = LINKER.defaultLookup();
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    private static final MethodHandle SOCKET = errnoCall("socket", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle SETSOCKOPT = errnoCall(
        "setsockopt", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle GETSOCKOPT = errnoCall(
        "getsockopt", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle BIND = errnoCall("bind", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle MMAP = errnoCall(
        "mmap", FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle SENDTO = errnoCall(
        "sendto", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle POLL = errnoCall("poll", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle IF_NAMETOINDEX = errnoCall("if_nametoindex", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    private static final MethodHandle CLOSE = errnoCall("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle EVENTFD = errnoCall("eventfd", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle READ = errnoCall("read", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle WRITE = errnoCall("write", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle IOCTL = LINKER.downcallHandle(
        symbol("ioctl"), FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS),
        CAPTURE_ERRNO, Linker.Option.firstVariadicArg(2));
    private static final MethodHandle GETPAGESIZE = LINKER.downcallHandle(
        symbol("getpagesize"), FunctionDescriptor.of(JAVA_INT));
    private static final MethodHandle GETTID = LINKER.downcallHandle(symbol("gettid"), FunctionDescriptor.of(JAVA_INT));
    private static final MethodHandle SETPRIORITY = errnoCall(
        "setpriority", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));

    // Calls a run may never make (AF_XDP's, bpf, network namespaces, errors, unmapping at close) are linked on their
    // first use, each in a holder class of its own: every distinct signature linked costs the JVM's start about 10 ms
    // of CPU (the linker spins classes for it), and a static final in a holder is as constant to the JIT as one here.

    private static final class Munmap
    {
        static final MethodHandle HANDLE = errnoCall("munmap", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
    }

    private static final class RecvFrom
    {
        static final MethodHandle HANDLE = errnoCall(
            "recvfrom", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS, ADDRESS));
    }

    /** syscall(2) with three arguments, all passed as longs as the variadic C function reads them. */
    private static final class Syscall3
    {
        static final MethodHandle HANDLE = LINKER.downcallHandle(
            symbol("syscall"), FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG),
            CAPTURE_ERRNO, Linker.Option.firstVariadicArg(1));
    }

    private static final class Open
    {
        static final MethodHandle HANDLE = errnoCall("open", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    }

    private static final class Setns
    {
        static final MethodHandle HANDLE = errnoCall("setns", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    }

    /** The sidecar agent's Unix socket ({@link UnixFdListener}): linked only by a process that runs one. */
    private static final class Listen
    {
        static final MethodHandle HANDLE = errnoCall("listen", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    }

    private static final class Accept4
    {
        static final MethodHandle HANDLE = errnoCall(
            "accept4", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
    }

    private static final class Shutdown
    {
        static final MethodHandle HANDLE = errnoCall("shutdown", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    }

    private static final class RecvMsg
    {
        static final MethodHandle HANDLE = errnoCall(
            "recvmsg", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    }

    private static final class Strerror
    {
        static final MethodHandle HANDLE = LINKER.downcallHandle(
            symbol("strerror"), FunctionDescriptor.of(ADDRESS, JAVA_INT));
    }

    /** Longest C string strerror is trusted to return. */
    private static final long STRERROR_MAX = 256;

    private Libc()
    {
    }

    static MemorySegment allocateErrnoState(final Arena arena)
    {
        return arena.allocate(CAPTURE_LAYOUT);
    }

    static int errno(final MemorySegment errnoState)
    {
        return (int)ERRNO.get(errnoState, 0L);
    }

    static String strerror(final int errno)
    {
        try
        {
            final MemorySegment text = (MemorySegment)Strerror.HANDLE.invokeExact(errno);
            return text.equals(MemorySegment.NULL) ? "errno " + errno : text.reinterpret(STRERROR_MAX).getString(0);
        }
        catch (final Throwable t)
        {
            return "errno " + errno;
        }
    }

    static int socket(final MemorySegment errnoState, final int domain, final int type, final int protocol)
    {
        try
        {
            return (int)SOCKET.invokeExact(errnoState, domain, type, protocol);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int setsockopt(
        final MemorySegment errnoState, final int fd, final int level, final int name, final MemorySegment value,
        final int length)
    {
        try
        {
            return (int)SETSOCKOPT.invokeExact(errnoState, fd, level, name, value, length);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int getsockopt(
        final MemorySegment errnoState, final int fd, final int level, final int name, final MemorySegment value,
        final MemorySegment lengthInOut)
    {
        try
        {
            return (int)GETSOCKOPT.invokeExact(errnoState, fd, level, name, value, lengthInOut);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int bind(final MemorySegment errnoState, final int fd, final MemorySegment address, final int length)
    {
        try
        {
            return (int)BIND.invokeExact(errnoState, fd, address, length);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static MemorySegment mmap(
        final MemorySegment errnoState, final long length, final int prot, final int flags, final int fd)
    {
        return mmap(errnoState, length, prot, flags, fd, 0L);
    }

    /**
     * mmap(NULL, length, prot, flags, fd, offset): for descriptors whose mmap offset selects what is mapped
     * (the rings of an AF_XDP socket).
     */
    static MemorySegment mmap(
        final MemorySegment errnoState, final long length, final int prot, final int flags, final int fd,
        final long offset)
    {
        try
        {
            return (MemorySegment)MMAP.invokeExact(errnoState, MemorySegment.NULL, length, prot, flags, fd, offset);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int munmap(final MemorySegment errnoState, final MemorySegment address, final long length)
    {
        try
        {
            return (int)Munmap.HANDLE.invokeExact(errnoState, address, length);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    /**
     * sendto(fd, NULL, 0, flags, NULL, 0): the TX ring kick. No allocation, suitable for the hot path.
     */
    static long sendKick(final MemorySegment errnoState, final int fd, final int flags)
    {
        try
        {
            return (long)SENDTO.invokeExact(
                errnoState, fd, MemorySegment.NULL, 0L, flags, MemorySegment.NULL, 0);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    /**
     * recvfrom(fd, NULL, 0, flags, NULL, NULL): wakes an AF_XDP socket's receive side (fill ring). No allocation.
     */
    static long recvKick(final MemorySegment errnoState, final int fd, final int flags)
    {
        try
        {
            return (long)RecvFrom.HANDLE.invokeExact(
                errnoState, fd, MemorySegment.NULL, 0L, flags, MemorySegment.NULL, MemorySegment.NULL);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int listen(final MemorySegment errnoState, final int fd, final int backlog)
    {
        try
        {
            return (int)Listen.HANDLE.invokeExact(errnoState, fd, backlog);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int shutdown(final MemorySegment errnoState, final int fd, final int how)
    {
        try
        {
            return (int)Shutdown.HANDLE.invokeExact(errnoState, fd, how);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    /** accept4(fd, NULL, NULL, flags): the peer's address is not wanted (a Unix socket's peers are unnamed). */
    static int accept4(final MemorySegment errnoState, final int fd, final int flags)
    {
        try
        {
            return (int)Accept4.HANDLE.invokeExact(errnoState, fd, MemorySegment.NULL, MemorySegment.NULL, flags);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static long recvmsg(final MemorySegment errnoState, final int fd, final MemorySegment message, final int flags)
    {
        try
        {
            return (long)RecvMsg.HANDLE.invokeExact(errnoState, fd, message, flags);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    /**
     * syscall(number, a, b, c), for system calls the C library has no wrapper for (bpf).
     */
    static long syscall(final MemorySegment errnoState, final long number, final long a, final long b, final long c)
    {
        try
        {
            return (long)Syscall3.HANDLE.invokeExact(errnoState, number, a, b, c);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int poll(final MemorySegment errnoState, final MemorySegment fds, final long count, final int timeoutMs)
    {
        try
        {
            return (int)POLL.invokeExact(errnoState, fds, count, timeoutMs);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int ifNameToIndex(final MemorySegment errnoState, final MemorySegment name)
    {
        try
        {
            return (int)IF_NAMETOINDEX.invokeExact(errnoState, name);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int eventfd(final MemorySegment errnoState, final int initialValue, final int flags)
    {
        try
        {
            return (int)EVENTFD.invokeExact(errnoState, initialValue, flags);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static long read(final MemorySegment errnoState, final int fd, final MemorySegment buffer, final long length)
    {
        try
        {
            return (long)READ.invokeExact(errnoState, fd, buffer, length);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static long write(final MemorySegment errnoState, final int fd, final MemorySegment buffer, final long length)
    {
        try
        {
            return (long)WRITE.invokeExact(errnoState, fd, buffer, length);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int close(final MemorySegment errnoState, final int fd)
    {
        try
        {
            return (int)CLOSE.invokeExact(errnoState, fd);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int open(final MemorySegment errnoState, final MemorySegment path, final int flags)
    {
        try
        {
            return (int)Open.HANDLE.invokeExact(errnoState, path, flags);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int setns(final MemorySegment errnoState, final int fd, final int nstype)
    {
        try
        {
            return (int)Setns.HANDLE.invokeExact(errnoState, fd, nstype);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int ioctl(final MemorySegment errnoState, final int fd, final long request, final MemorySegment argument)
    {
        try
        {
            return (int)IOCTL.invokeExact(errnoState, fd, request, argument);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int pageSize()
    {
        try
        {
            return (int)GETPAGESIZE.invokeExact();
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    /** The calling thread's kernel task id (gettid(2)). */
    static int gettid()
    {
        try
        {
            return (int)GETTID.invokeExact();
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    static int setpriority(final MemorySegment errnoState, final int which, final int who, final int prio)
    {
        try
        {
            return (int)SETPRIORITY.invokeExact(errnoState, which, who, prio);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    private static MethodHandle errnoCall(final String name, final FunctionDescriptor descriptor)
    {
        return LINKER.downcallHandle(symbol(name), descriptor, CAPTURE_ERRNO);
    }

    private static MemorySegment symbol(final String name)
    {
        return LOOKUP.find(name).orElseThrow(() -> new IllegalStateException("libc symbol not found: " + name));
    }

    private static RuntimeException rethrow(final Throwable t)
    {
        if (t instanceof RuntimeException runtime)
        {
            return runtime;
        }
        if (t instanceof Error error)
        {
            throw error;
        }
        return new IllegalStateException("native call failed", t);
    }
}
