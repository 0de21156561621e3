package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * Ethernet II header, optionally followed by one or two VLAN tags (802.1Q / 802.1ad).
 * <pre>
 *   0                   6                   12      14
 *   | destination MAC   | source MAC        | type  |
 *   with a tag:                             | TPID  | TCI | type |
 * </pre>
 */
public final class EthernetHeader
{
    public static final int DST_MAC_OFFSET = 0;
    public static final int SRC_MAC_OFFSET = 6;
    public static final int ETHER_TYPE_OFFSET = 12;
    public static final int MAC_LENGTH = 6;
    public static final int LENGTH = 14;
    public static final int VLAN_TAG_LENGTH = 4;

    public static final int ETHER_TYPE_IPV4 = 0x0800;
    public static final int ETHER_TYPE_ARP = 0x0806;
    public static final int ETHER_TYPE_VLAN = 0x8100;
    public static final int ETHER_TYPE_QINQ = 0x88A8;
    public static final int ETHER_TYPE_IPV6 = 0x86DD;

    private EthernetHeader()
    {
    }

    public static int etherType(final DirectBuffer buffer, final int offset)
    {
        return buffer.getShort(offset + ETHER_TYPE_OFFSET, BIG_ENDIAN) & 0xFFFF;
    }

    public static void etherType(final MutableDirectBuffer buffer, final int offset, final int type)
    {
        buffer.putShort(offset + ETHER_TYPE_OFFSET, (short)type, BIG_ENDIAN);
    }

    /**
     * @return the 48-bit destination MAC as the low bits of a long.
     */
    public static long dstMac(final DirectBuffer buffer, final int offset)
    {
        return mac(buffer, offset + DST_MAC_OFFSET);
    }

    public static long srcMac(final DirectBuffer buffer, final int offset)
    {
        return mac(buffer, offset + SRC_MAC_OFFSET);
    }

    public static void dstMac(final MutableDirectBuffer buffer, final int offset, final long mac)
    {
        putMac(buffer, offset + DST_MAC_OFFSET, mac);
    }

    public static void srcMac(final MutableDirectBuffer buffer, final int offset, final long mac)
    {
        putMac(buffer, offset + SRC_MAC_OFFSET, mac);
    }

    public static long mac(final DirectBuffer buffer, final int index)
    {
        return ((long)(buffer.getShort(index, BIG_ENDIAN) & 0xFFFF) << 32) |
            (buffer.getInt(index + 2, BIG_ENDIAN) & 0xFFFF_FFFFL);
    }

    public static void putMac(final MutableDirectBuffer buffer, final int index, final long mac)
    {
        buffer.putShort(index, (short)(mac >>> 32), BIG_ENDIAN);
        buffer.putInt(index + 2, (int)mac, BIG_ENDIAN);
    }

    /**
     * Parse a MAC written as six hex pairs separated by ':' or '-'.
     *
     * @throws IllegalArgumentException if the text is not a MAC address.
     */
    public static long parseMac(final String text)
    {
        final String[] parts = text.split("[:-]");
        if (parts.length != MAC_LENGTH)
        {
            throw new IllegalArgumentException("not a MAC address: " + text);
        }
        long mac = 0;
        for (final String part : parts)
        {
            if (part.length() != 2)
            {
                throw new IllegalArgumentException("not a MAC address: " + text);
            }
            try
            {
                mac = (mac << 8) | Integer.parseInt(part, 16);
            }
            catch (final NumberFormatException ex)
            {
                throw new IllegalArgumentException("not a MAC address: " + text, ex);
            }
        }
        return mac;
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
            final int b = (int)(mac >>> shift) & 0xFF;
            sb.append(Character.forDigit(b >>> 4, 16)).append(Character.forDigit(b & 0xF, 16));
        }
        return sb.toString();
    }
}
