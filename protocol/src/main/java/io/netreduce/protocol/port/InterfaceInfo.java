package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static io.netreduce.protocol.port.LinuxPacketAbi.ETH_ALEN;
import static io.netreduce.protocol.port.LinuxPacketAbi.IFREQ_HWADDR_DATA_OFFSET;
import static io.netreduce.protocol.port.LinuxPacketAbi.IFREQ_MTU_OFFSET;
import static io.netreduce.protocol.port.LinuxPacketAbi.IFREQ_SIZE;
import static io.netreduce.protocol.port.LinuxPacketAbi.SIOCGIFHWADDR;
import static io.netreduce.protocol.port.LinuxPacketAbi.SIOCGIFMTU;

/**
 * An interface's MTU and MAC address, read with the SIOCGIFMTU and SIOCGIFHWADDR ioctls when a port opens (any
 * socket will do for them).
 *
 * @param mtu        the interface's MTU.
 * @param macAddress its 6-byte MAC address.
 */
record InterfaceInfo(int mtu, byte[] macAddress)
{
    /**
     * @throws PortException naming the ioctl that failed and its errno.
     */
    static InterfaceInfo read(final MemorySegment errnoState, final int fd, final String name, final Arena scratch)
    {
        final MemorySegment ifreq = scratch.allocate(IFREQ_SIZE, 8);
        final int mtu = mtu(errnoState, fd, name, ifreq);
        if (mtu < 0)
        {
            throw new PortException("SIOCGIFMTU on '" + name + "'", Libc.errno(errnoState));
        }

        ifreq.fill((byte)0);
        ifreq.setString(0, name);
        if (Libc.ioctl(errnoState, fd, SIOCGIFHWADDR, ifreq) < 0)
        {
            throw new PortException("SIOCGIFHWADDR on '" + name + "'", Libc.errno(errnoState));
        }
        return new InterfaceInfo(mtu, ifreq.asSlice(IFREQ_HWADDR_DATA_OFFSET, ETH_ALEN).toArray(ValueLayout.JAVA_BYTE));
    }

    /**
     * SIOCGIFMTU on {@code fd} (any socket will do) through {@code ifreq} ({@code IFREQ_SIZE} bytes).
     *
     * @return the interface's MTU, or -1 when the kernel refused (errno in {@code errnoState}).
     */
    static int mtu(final MemorySegment errnoState, final int fd, final String name, final MemorySegment ifreq)
    {
        ifreq.fill((byte)0);
        ifreq.setString(0, name);
        return Libc.ioctl(errnoState, fd, SIOCGIFMTU, ifreq) < 0 ? -1 :
            ifreq.get(ValueLayout.JAVA_INT, IFREQ_MTU_OFFSET);
    }
}
