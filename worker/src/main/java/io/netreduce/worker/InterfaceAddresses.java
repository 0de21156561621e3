package io.netreduce.worker;

import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;

/**
 * An interface's own address, for the commands that take {@code --dev} without {@code --ip}. Apart from
 * {@link AllReduceCommand} so that {@code worker serve} loads no picocli command to find it.
 */
final class InterfaceAddresses
{
    private InterfaceAddresses()
    {
    }

    /**
     * @return the first IPv4 address of {@code dev}.
     * @throws IllegalArgumentException if there is no such interface here or it has no IPv4 address.
     */
    static InetAddress ipv4(final String dev) throws IOException
    {
        final NetworkInterface nif = NetworkInterface.getByName(dev);
        if (nif == null)
        {
            throw new IllegalArgumentException("no interface " + dev + " in this network namespace");
        }
        for (final InetAddress address : nif.inetAddresses().toList())
        {
            if (address instanceof Inet4Address)
            {
                return address;
            }
        }
        throw new IllegalArgumentException(dev + " has no IPv4 address; pass --ip");
    }
}
