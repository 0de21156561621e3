package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static io.netreduce.protocol.port.LinuxPacketAbi.*;

/**
 * The system calls both kernel ports ({@link AfPacketPort}, {@link AfXdpPort}) make on their interface, each failure
 * turned into a {@link PortException} that names the step and the interface, and the arena that holds for the
 * port's lifetime what those calls read and write (the errno capture, the poll descriptor).
 * <p>
 * One instance per port: its opener makes it and hands it to the port, which releases it last on close. The set-up
 * calls allocate; {@link #awaitReadable} does not, so an idle strategy may call it between receives.
 */
final class PortSystemCalls
{
    /** pollfd.events bit: readable. */
    private static final short POLLIN = 0x1;
    /** struct pollfd: int fd, short events, short revents. */
    private static final int POLLFD_SIZE = 8;
    private static final int POLLFD_FD_OFFSET = 0;
    private static final int POLLFD_EVENTS_OFFSET = 4;

    private final String name;
    /** Shared, not confined: a port is opened on one thread (in its network namespace) and owned by another. */
    private final Arena arena = Arena.ofShared();
    private final MemorySegment errnoState = Libc.allocateErrnoState(arena);

    /**
     * @param name the interface the port opens on, named in every failure.
     */
    PortSystemCalls(final String name)
    {
        this.name = name;
    }

    /**
     * @return the arena that lives as long as the port, for what the port's own calls pass to the kernel.
     */
    Arena arena()
    {
        return arena;
    }

    /**
     * @return where the calls capture errno; owning thread only (a control-side call makes its own).
     */
    MemorySegment errnoState()
    {
        return errnoState;
    }

    /**
     * @return the interface's index.
     * @throws PortException if there is no such interface in the calling thread's network namespace.
     */
    int interfaceIndex(final Arena scratch)
    {
        final int ifIndex = Libc.ifNameToIndex(errnoState, scratch.allocateFrom(name));
        if (ifIndex == 0)
        {
            throw new PortException("no such network interface '" + name + "'", Libc.errno(errnoState));
        }
        return ifIndex;
    }

    /**
     * @param fd any socket: the interface ioctls only need one to be made on.
     */
    InterfaceInfo interfaceInfo(final int fd, final Arena scratch)
    {
        return InterfaceInfo.read(errnoState, fd, name, scratch);
    }

    /**
     * Open a raw socket of protocol 0 (a packet socket of protocol 0 receives nothing until a bind names one).
     *
     * @param domainName the address family as the failure names it, e.g. {@code AF_PACKET}.
     */
    int rawSocket(final int domain, final String domainName)
    {
        final int fd = Libc.socket(errnoState, domain, SOCK_RAW | SOCK_CLOEXEC, 0);
        if (fd < 0)
        {
            throw new PortException("socket(" + domainName + ", SOCK_RAW) for '" + name + "' (needs CAP_NET_RAW)",
                Libc.errno(errnoState));
        }
        return fd;
    }

    /**
     * Put the interface into promiscuous mode through packet socket {@code fd}'s PACKET_MR_PROMISC membership, which
     * keeps it so exactly as long as the socket is open: nothing to undo on close, nothing left if the process dies.
     */
    void addPromiscuousMembership(final Arena scratch, final int fd, final int ifIndex)
    {
        final MemorySegment membership = scratch.allocate(PACKET_MREQ_SIZE, 4);
        membership.set(ValueLayout.JAVA_INT, PACKET_MREQ_IFINDEX_OFFSET, ifIndex);
        membership.set(ValueLayout.JAVA_SHORT, PACKET_MREQ_TYPE_OFFSET, (short)PACKET_MR_PROMISC);
        membership.set(ValueLayout.JAVA_SHORT, PACKET_MREQ_ALEN_OFFSET, (short)0);
        setOption(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, membership, PACKET_MREQ_SIZE,
            "PACKET_ADD_MEMBERSHIP promiscuous");
    }

    /**
     * @param failure what to name in the exception, or null for an option that may be missing.
     */
    void setIntOption(
        final Arena scratch, final int fd, final int level, final int option, final int value, final String failure)
    {
        final MemorySegment segment = scratch.allocate(ValueLayout.JAVA_INT);
        segment.set(ValueLayout.JAVA_INT, 0, value);
        if (Libc.setsockopt(errnoState, fd, level, option, segment, Integer.BYTES) < 0 && null != failure)
        {
            throw new PortException("setsockopt " + failure + " on '" + name + "'", Libc.errno(errnoState));
        }
    }

    void setOption(
        final int fd, final int level, final int option, final MemorySegment value, final int length,
        final String failure)
    {
        if (Libc.setsockopt(errnoState, fd, level, option, value, length) < 0)
        {
            throw new PortException("setsockopt " + failure + " on '" + name + "'", Libc.errno(errnoState));
        }
    }

    /**
     * Map {@code length} bytes readable and writable.
     *
     * @param fd     the descriptor to map, or -1 for an anonymous mapping.
     * @param offset what to map, for descriptors whose mmap offset selects it (an AF_XDP socket's rings); else 0.
     * @param what   the mapping as the failure names it, e.g. {@code RX ring}.
     * @return the mapping's address.
     */
    long map(final long length, final int flags, final int fd, final long offset, final String what)
    {
        final MemorySegment mapped = Libc.mmap(errnoState, length, PROT_READ | PROT_WRITE, flags, fd, offset);
        if (mapped.address() == MAP_FAILED)
        {
            throw new PortException("mmap " + what + " of " + length + " bytes for '" + name + "'",
                Libc.errno(errnoState));
        }
        return mapped.address();
    }

    void unmap(final long address, final long length)
    {
        Libc.munmap(errnoState, MemorySegment.ofAddress(address), length);
    }

    /**
     * Close {@code fd} unless it is negative (never opened, or handed back already).
     */
    void close(final int fd)
    {
        if (fd >= 0)
        {
            Libc.close(errnoState, fd);
        }
    }

    /**
     * @return a pollfd asking whether {@code fd} is readable, allocated once so that waiting does not allocate.
     */
    MemorySegment readablePollFd(final int fd)
    {
        final MemorySegment pollFd = arena.allocate(POLLFD_SIZE, 8);
        pollFd.set(ValueLayout.JAVA_INT, POLLFD_FD_OFFSET, fd);
        pollFd.set(ValueLayout.JAVA_SHORT, POLLFD_EVENTS_OFFSET, POLLIN);
        return pollFd;
    }

    /**
     * Wait, without spinning, until the descriptor of {@code pollFd} is readable or {@code timeoutMs} passes.
     *
     * @return true if it polled readable.
     */
    boolean awaitReadable(final MemorySegment pollFd, final int timeoutMs)
    {
        return Libc.poll(errnoState, pollFd, 1, timeoutMs) > 0;
    }

    /**
     * @return whether a failed transmit kick only means "not now" (queue full, interrupted): the frames stay queued
     *         and go with a later flush, so it is no transmit error.
     */
    static boolean isTransientSendError(final int errno)
    {
        return errno == EAGAIN || errno == ENOBUFS || errno == EINTR;
    }

    /**
     * Release the arena: last, once the port's mappings and descriptors are gone.
     */
    void release()
    {
        arena.close();
    }
}
