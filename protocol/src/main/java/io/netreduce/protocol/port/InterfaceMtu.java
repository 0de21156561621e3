package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.OptionalInt;

import static io.netreduce.protocol.port.LinuxPacketAbi.IFREQ_SIZE;
import static io.netreduce.protocol.port.LinuxPacketAbi.SOCK_CLOEXEC;

/**
 * An interface's MTU as this process's network namespace sees it (SIOCGIFMTU on a throwaway UDP socket: no
 * privilege needed), for the configuration's checks before any port opens. Not /sys/class/net: that shows the
 * namespace of whoever mounted sysfs, which under a unit's NetworkNamespacePath need not be the daemon's.
 */
public final class InterfaceMtu
{
    private static final int AF_INET = 2;
    private static final int SOCK_DGRAM = 2;

    private InterfaceMtu()
    {
    }

    /**
     * @param name the interface's name.
     * @return its MTU; empty when there is no such interface here or it cannot be asked (the caller's other checks
     * say why).
     */
    public static OptionalInt of(final String name)
    {
        if (name == null || name.isEmpty() || name.length() >= 16)
        {
            return OptionalInt.empty();
        }
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment errnoState = Libc.allocateErrnoState(arena);
            final int fd = Libc.socket(errnoState, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            if (fd < 0)
            {
                return OptionalInt.empty();
            }
            try
            {
                final int mtu = InterfaceInfo.mtu(errnoState, fd, name, arena.allocate(IFREQ_SIZE, 8));
                return mtu < 0 ? OptionalInt.empty() : OptionalInt.of(mtu);
            }
            finally
            {
                Libc.close(errnoState, fd);
            }
        }
    }
}
