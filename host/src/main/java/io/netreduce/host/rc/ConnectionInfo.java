package io.netreduce.host.rc;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * What one side of an RC connection tells the other out of band, as {@code ibv_rc_pingpong} and perftest
 * exchange them: queue pair number, starting PSN, IP address (RoCEv2's GID), MAC, and one memory region's
 * virtual address, R_Key and length for the peer to write into.
 * <p>
 * Text form, one line of space-separated {@code key=value} pairs:
 * <pre>qpn=0x000011 psn=0x4f21a0 ip=10.77.0.1 mac=02:00:00:00:00:01 va=0x7e0000000000 rkey=0x00000101 len=4096</pre>
 */
public record ConnectionInfo(int qpn, int psn, InetAddress ip, long mac, long va, int rkey, long length)
{
    public String toLine()
    {
        return String.format(Locale.ROOT, "qpn=0x%06x psn=0x%06x ip=%s mac=%s va=0x%x rkey=0x%08x len=%d",
            qpn, psn, ip.getHostAddress(), formatMac(mac), va, rkey, length);
    }

    /**
     * @throws IllegalArgumentException naming the first missing or malformed field.
     */
    public static ConnectionInfo parse(final String line)
    {
        final Map<String, String> fields = new HashMap<>();
        for (final String token : line.trim().split("\\s+"))
        {
            final int eq = token.indexOf('=');
            if (eq <= 0)
            {
                throw new IllegalArgumentException("malformed connection info token '" + token + "' in: " + line);
            }
            fields.put(token.substring(0, eq), token.substring(eq + 1));
        }
        try
        {
            return new ConnectionInfo(
                (int)parseNumber(require(fields, "qpn")),
                (int)parseNumber(require(fields, "psn")),
                InetAddress.getByName(require(fields, "ip")),
                parseMac(require(fields, "mac")),
                parseNumber(require(fields, "va")),
                (int)parseNumber(require(fields, "rkey")),
                parseNumber(require(fields, "len")));
        }
        catch (final UnknownHostException | NumberFormatException ex)
        {
            throw new IllegalArgumentException("malformed connection info: " + line + " (" + ex.getMessage() + ")", ex);
        }
    }

    private static String require(final Map<String, String> fields, final String key)
    {
        final String value = fields.get(key);
        if (value == null)
        {
            throw new IllegalArgumentException("connection info lacks '" + key + "'");
        }
        return value;
    }

    private static long parseNumber(final String text)
    {
        return text.startsWith("0x") || text.startsWith("0X") ?
            Long.parseUnsignedLong(text.substring(2), 16) : Long.parseLong(text);
    }

    public static String formatMac(final long mac)
    {
        final StringBuilder sb = new StringBuilder(17);
        for (int shift = 40; shift >= 0; shift -= 8)
        {
            if (sb.length() > 0)
            {
                sb.append(':');
            }
            sb.append(String.format(Locale.ROOT, "%02x", (mac >>> shift) & 0xFF));
        }
        return sb.toString();
    }

    public static long parseMac(final String text)
    {
        final String[] parts = text.split(":");
        if (parts.length != 6)
        {
            throw new IllegalArgumentException("MAC must have 6 octets: " + text);
        }
        long mac = 0;
        for (final String part : parts)
        {
            mac = (mac << 8) | Integer.parseInt(part, 16);
        }
        return mac;
    }

    public static long macFromBytes(final byte[] bytes)
    {
        long mac = 0;
        for (int i = 0; i < 6; i++)
        {
            mac = (mac << 8) | (bytes[i] & 0xFF);
        }
        return mac;
    }
}
