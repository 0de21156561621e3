package io.netreduce.controlplane.config;

/**
 * An IPv4 network written as {@code a.b.c.d/n} (a bare address means {@code /32}): who may use a service the
 * appliance offers on the network, such as the SwitchML controller.
 *
 * @param network the network address, host bits cleared.
 * @param prefix  the prefix length, 0..32.
 */
public record Ipv4Cidr(int network, int prefix)
{
    /**
     * @param text {@code a.b.c.d/n} or {@code a.b.c.d}.
     * @return the network.
     * @throws IllegalArgumentException with a message for the configuration's error list.
     */
    public static Ipv4Cidr parse(final String text)
    {
        if (text == null)
        {
            throw new IllegalArgumentException("expected an IPv4 network like 10.77.0.0/24");
        }
        final int slash = text.indexOf('/');
        final String address = slash < 0 ? text : text.substring(0, slash);
        final java.net.InetAddress parsed = Addresses.parseIpLiteral(address);
        if (!(parsed instanceof java.net.Inet4Address))
        {
            throw new IllegalArgumentException("'" + text + "' is not an IPv4 network like 10.77.0.0/24");
        }
        int prefix = 32;
        if (slash >= 0)
        {
            try
            {
                prefix = Integer.parseInt(text.substring(slash + 1));
            }
            catch (final NumberFormatException ex)
            {
                prefix = -1;
            }
            if (prefix < 0 || prefix > 32)
            {
                throw new IllegalArgumentException("'" + text + "': the prefix length must be 0..32");
            }
        }
        final int ip = toInt(parsed);
        return new Ipv4Cidr(ip & mask(prefix), prefix);
    }

    /**
     * @param ip an IPv4 address as an int.
     * @return whether it is in this network.
     */
    public boolean contains(final int ip)
    {
        return (ip & mask(prefix)) == network;
    }

    /**
     * @return the address as a big-endian int (a.b.c.d is a << 24 | ...).
     */
    public static int toInt(final java.net.InetAddress address)
    {
        final byte[] b = address.getAddress();
        return (b[0] & 0xFF) << 24 | (b[1] & 0xFF) << 16 | (b[2] & 0xFF) << 8 | (b[3] & 0xFF);
    }

    private static int mask(final int prefix)
    {
        return prefix == 0 ? 0 : -1 << (32 - prefix);
    }

    @Override
    public String toString()
    {
        return (network >>> 24) + "." + (network >>> 16 & 0xFF) + "." + (network >>> 8 & 0xFF) + "." +
            (network & 0xFF) + "/" + prefix;
    }
}
