package io.netreduce.switchml.controller;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.HexFormat;

/**
 * The address encodings of the SwitchML controller protocol.
 * <ul>
 *   <li><b>MAC</b>: a {@code uint64} whose low 48 bits are the address, the first octet the most significant of
 *   them: 02:77:00:00:00:01 is {@code 0x0000_0277_0000_0001L}. The published client (DPDK backend) copies the
 *   port's six octets into a {@code uint64_t} on a little-endian host and reverses them
 *   ({@code ChangeMacEndianness}, which it calls "little endian") before it sends; the Tofino controller prints
 *   the value with {@code '{:012X}'} and splits it into octet pairs, and sends its own address back as
 *   {@code int('0277...', 16)}. Both agree with this encoding.</li>
 *   <li><b>IPv4</b>: a {@code uint32} in host order, {@code rte_be_to_cpu_32} of the address: 10.0.0.1 is
 *   {@code 0x0A00_0001}, as Python's {@code int(ipaddress.ip_address(...))}.</li>
 * </ul>
 */
public final class SwitchMlAddresses
{
    /** The bits a MAC may use. */
    public static final long MAC_MASK = 0xFFFF_FFFF_FFFFL;

    private SwitchMlAddresses()
    {
    }

    /**
     * @param octets the six octets of an Ethernet address, in wire order.
     * @return the address in the protocol's encoding.
     */
    public static long macFromOctets(final byte[] octets)
    {
        if (octets.length != 6)
        {
            throw new IllegalArgumentException("a MAC has 6 octets, not " + octets.length);
        }
        long mac = 0;
        for (final byte octet : octets)
        {
            mac = (mac << 8) | (octet & 0xFF);
        }
        return mac;
    }

    /**
     * @param mac an address in the protocol's encoding.
     * @return its six octets in wire order.
     */
    public static byte[] macOctets(final long mac)
    {
        requireMac(mac);
        final byte[] octets = new byte[6];
        for (int i = 0; i < 6; i++)
        {
            octets[i] = (byte)(mac >>> (40 - 8 * i));
        }
        return octets;
    }

    /**
     * @param text an address as six colon-separated hexadecimal octets, {@code 02:77:00:00:00:01}.
     * @return the address in the protocol's encoding.
     */
    public static long parseMac(final String text)
    {
        final String[] parts = text.split(":", -1);
        if (parts.length != 6)
        {
            throw new IllegalArgumentException("not a MAC address: " + text);
        }
        final byte[] octets = new byte[6];
        for (int i = 0; i < 6; i++)
        {
            if (parts[i].length() != 2)
            {
                throw new IllegalArgumentException("not a MAC address: " + text);
            }
            try
            {
                octets[i] = (byte)HexFormat.fromHexDigits(parts[i]);
            }
            catch (final IllegalArgumentException e)
            {
                throw new IllegalArgumentException("not a MAC address: " + text, e);
            }
        }
        return macFromOctets(octets);
    }

    /**
     * @param mac an address in the protocol's encoding.
     * @return the address as text, lower case: {@code 02:77:00:00:00:01}.
     */
    public static String formatMac(final long mac)
    {
        return HexFormat.ofDelimiter(":").formatHex(macOctets(mac));
    }

    /**
     * @param address an IPv4 address.
     * @return the address in the protocol's encoding (host order).
     */
    public static int ipv4(final Inet4Address address)
    {
        final byte[] octets = address.getAddress();
        return (octets[0] & 0xFF) << 24 | (octets[1] & 0xFF) << 16 | (octets[2] & 0xFF) << 8 | (octets[3] & 0xFF);
    }

    /**
     * @param ipv4 an address in the protocol's encoding.
     * @return the address.
     */
    public static Inet4Address ipv4Address(final int ipv4)
    {
        final byte[] octets = {(byte)(ipv4 >>> 24), (byte)(ipv4 >>> 16), (byte)(ipv4 >>> 8), (byte)ipv4};
        try
        {
            return (Inet4Address)InetAddress.getByAddress(octets);
        }
        catch (final UnknownHostException e)
        {
            throw new AssertionError("four octets are an IPv4 address", e);
        }
    }

    /**
     * @param ipv4 an address in the protocol's encoding.
     * @return the address as dotted text, {@code 10.0.0.1}.
     */
    public static String formatIpv4(final int ipv4)
    {
        return (ipv4 >>> 24) + "." + (ipv4 >>> 16 & 0xFF) + "." + (ipv4 >>> 8 & 0xFF) + "." + (ipv4 & 0xFF);
    }

    static void requireMac(final long mac)
    {
        if ((mac & ~MAC_MASK) != 0)
        {
            throw new IllegalArgumentException(
                "a MAC has 48 bits; 0x" + Long.toHexString(mac) + " has bits above them");
        }
    }
}
