package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

/**
 * Waits, without spinning, until any of a set of ports may have frames to receive: one {@code poll(2)} over the
 * receive sockets of the {@link AfPacketPort}s and {@link AfXdpPort}s, and over a {@link Doorbell} when one is
 * given, so that work handed over by another thread wakes the waiter at once. A port with frames its last kick left
 * in the transmit ring (the kernel refused them: the socket's buffer held a shaped or busy link's queue) adds its
 * transmit socket, polled for room: the waiter kicks again when the kernel can take them, instead of kicking,
 * being refused and yielding in a loop (an appliance did so 250,000 times a second behind 1 Gbit/s links; an idle
 * strategy's spins and yields before it waits still kick). Ports
 * without a file descriptor (the {@link MemoryPort}) are waited for by parking briefly (100 us). For idle
 * strategies of processes that share their cores (an appliance on a small box, a worker beside its trainer): a
 * blocked thread costs no CPU and wakes when a frame arrives.
 * <p>
 * Not thread-safe: owned by the thread that receives from the ports.
 */
public final class PortPoller implements AutoCloseable
{
    private static final short POLLIN = 0x1;
    private static final short POLLOUT = 0x4;
    /** With no socket to wait on (memory ports), park this long at most: as Agrona's backoff would. */
    private static final long NO_SOCKET_PARK_NS = 100_000;
    private static final int POLLFD_SIZE = 8;

    // Shared: built by the thread that opens the ports, used by the one that receives from them.
    private final Arena arena = Arena.ofShared();
    private final PollablePort[] sockets;
    private final MemorySegment pollFds;
    private final MemorySegment errnoState;
    /** Receive sockets and the doorbell: the first entries of every poll; transmit sockets follow as needed. */
    private final int count;
    private final Doorbell doorbell;

    public PortPoller(final List<? extends PacketPort> ports)
    {
        this(ports, null);
    }

    /**
     * @param doorbell also wake when it is rung (drained here before {@link #await} returns); null for none.
     */
    public PortPoller(final List<? extends PacketPort> ports, final Doorbell doorbell)
    {
        final List<PollablePort> pollable = new ArrayList<>();
        for (final PacketPort port : ports)
        {
            if (port instanceof PollablePort socket)
            {
                pollable.add(socket);
            }
        }
        sockets = pollable.toArray(new PollablePort[0]);
        this.doorbell = doorbell;
        count = sockets.length + (doorbell != null ? 1 : 0);
        pollFds = arena.allocate((long)POLLFD_SIZE * Math.max(1, count + sockets.length), 8);
        for (int i = 0; i < sockets.length; i++)
        {
            pollFds.set(ValueLayout.JAVA_INT, (long)i * POLLFD_SIZE, sockets[i].receiveFd());
            pollFds.set(ValueLayout.JAVA_SHORT, (long)i * POLLFD_SIZE + 4, POLLIN);
        }
        if (doorbell != null)
        {
            pollFds.set(ValueLayout.JAVA_INT, (long)sockets.length * POLLFD_SIZE, doorbell.fd());
            pollFds.set(ValueLayout.JAVA_SHORT, (long)sockets.length * POLLFD_SIZE + 4, POLLIN);
        }
        errnoState = Libc.allocateErrnoState(arena);
    }

    /**
     * @return whether any port has a descriptor to wait on (else {@link #await} only parks).
     */
    public boolean canBlock()
    {
        return count > 0;
    }

    /**
     * Wait until a port may have frames, or {@code timeoutMs} passes. Returns at once when a port already has
     * frames in its ring, or frames queued for the kernel that only need a kick (an AF_XDP port's); an AF_PACKET
     * port's frames that the last kick left queued are waited for with the rest, until its transmit socket has room.
     *
     * @return true if a port may have frames to receive or the kernel may take frames it refused.
     */
    public boolean await(final int timeoutMs)
    {
        if (count == 0)
        {
            LockSupport.parkNanos(Math.min(timeoutMs * 1_000_000L, NO_SOCKET_PARK_NS));
            return false;
        }
        int polled = count;
        for (final PollablePort socket : sockets)
        {
            if (socket.hasReceiveWork())
            {
                return true;
            }
            if (socket.hasPendingTransmit())
            {
                final int transmitFd = socket.transmitFd();
                if (transmitFd < 0)
                {
                    return true;
                }
                final long entry = (long)polled * POLLFD_SIZE;
                pollFds.set(ValueLayout.JAVA_INT, entry, transmitFd);
                pollFds.set(ValueLayout.JAVA_SHORT, entry + 4, POLLOUT);
                polled++;
            }
        }
        final int ready = Libc.poll(errnoState, pollFds, polled, timeoutMs);
        if (ready > 0 && doorbell != null &&
            pollFds.get(ValueLayout.JAVA_SHORT, (long)sockets.length * POLLFD_SIZE + 6) != 0)
        {
            doorbell.drain();
        }
        return ready > 0;
    }

    @Override
    public void close()
    {
        arena.close();
    }
}
