package io.netreduce.controlplane.config;

import java.net.InetAddress;
import java.util.regex.Pattern;

/**
 * Parsing of the address literals a configuration holds. Never resolves names: a configuration that needs DNS
 * to load would make the appliance's start depend on the network it is meant to serve.
 */
public final class Addresses
{
    /**
     * Four decimal octets, no leading zeros. The JDK's literal parser also takes the BSD forms ("10.0.2" meaning
     * 10.0.0.2, or one 32-bit number), which in a configuration are far more likely typos than intent.
     */
    private static final Pattern IPV4 =
        Pattern.compile("(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)(\\.(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3}");
    private static final Pattern MAC = Pattern.compile("[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}");

    private Addresses()
    {
    }

    /**
     * @param text an IPv4 or IPv6 literal.
     * @return the address, or null if the text is not a literal.
     */
    public static InetAddress parseIpLiteral(final String text)
    {
        if (text == null || text.isEmpty() || (text.indexOf(':') < 0 && !IPV4.matcher(text).matches()))
        {
            return null;
        }
        try
        {
            return InetAddress.ofLiteral(text);
        }
        catch (final IllegalArgumentException ex)
        {
            return null;
        }
    }

    /**
     * @param text a MAC address candidate.
     * @return true if it is six colon-separated hex octets.
     */
    public static boolean isMac(final String text)
    {
        return text != null && MAC.matcher(text).matches();
    }
}
