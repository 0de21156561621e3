package io.netreduce.dataplane.clt;

import org.agrona.DirectBuffer;

import java.net.InetAddress;
import java.net.UnknownHostException;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * IP addresses as two longs (high and low 64 bits of an IPv6 address), so that IPv4 and IPv6 keys share one
 * table without allocation. IPv4 addresses are held IPv4-mapped ({@code ::ffff:a.b.c.d}).
 */
public final class IpKey
{
    private static final long V4_MAPPED_PREFIX = 0x0000_FFFF_0000_0000L;

    private IpKey()
    {
    }

    public static long v4Low(final int address)
    {
        return V4_MAPPED_PREFIX | (address & 0xFFFF_FFFFL);
    }

    /**
     * @return the high 64 bits of the address at {@code offset} ({@code length} 4 or 16 bytes).
     */
    public static long high(final DirectBuffer buffer, final int offset, final int length)
    {
        return length == 4 ? 0L : buffer.getLong(offset, BIG_ENDIAN);
    }

    public static long low(final DirectBuffer buffer, final int offset, final int length)
    {
        return length == 4 ? v4Low(buffer.getInt(offset, BIG_ENDIAN)) : buffer.getLong(offset + 8, BIG_ENDIAN);
    }

    public static long high(final InetAddress address)
    {
        final byte[] bytes = address.getAddress();
        return bytes.length == 4 ? 0L : toLong(bytes, 0);
    }

    public static long low(final InetAddress address)
    {
        final byte[] bytes = address.getAddress();
        return bytes.length == 4 ? v4Low((int)toLong4(bytes)) : toLong(bytes, 8);
    }

    /**
     * @return the address the key stands for (control path only: allocates).
     */
    public static InetAddress toAddress(final long high, final long low)
    {
        try
        {
            if (high == 0 && (low & 0xFFFF_FFFF_0000_0000L) == V4_MAPPED_PREFIX)
            {
                final int v4 = (int)low;
                return InetAddress.getByAddress(new byte[]{
                    (byte)(v4 >>> 24), (byte)(v4 >>> 16), (byte)(v4 >>> 8), (byte)v4 });
            }
            final byte[] bytes = new byte[16];
            for (int i = 0; i < 8; i++)
            {
                bytes[i] = (byte)(high >>> (56 - 8 * i));
                bytes[8 + i] = (byte)(low >>> (56 - 8 * i));
            }
            return InetAddress.getByAddress(bytes);
        }
        catch (final UnknownHostException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    static long hash(final long a, final long b, final long c, final long d, final long e)
    {
        long h = a * 0x9E37_79B9_7F4A_7C15L;
        h = Long.rotateLeft(h ^ b, 23) * 0xC2B2_AE3D_27D4_EB4FL;
        h = Long.rotateLeft(h ^ c, 29) * 0x1656_67B1_9E37_79F9L;
        h = Long.rotateLeft(h ^ d, 31) * 0x9E37_79B9_7F4A_7C15L;
        h = (h ^ e) * 0xC2B2_AE3D_27D4_EB4FL;
        return h ^ (h >>> 32);
    }

    private static long toLong(final byte[] bytes, final int from)
    {
        long value = 0;
        for (int i = 0; i < 8; i++)
        {
            value = (value << 8) | (bytes[from + i] & 0xFF);
        }
        return value;
    }

    private static long toLong4(final byte[] bytes)
    {
        return ((bytes[0] & 0xFFL) << 24) | ((bytes[1] & 0xFFL) << 16) | ((bytes[2] & 0xFFL) << 8) | (bytes[3] & 0xFFL);
    }
}
