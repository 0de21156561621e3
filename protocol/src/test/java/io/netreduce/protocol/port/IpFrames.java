package io.netreduce.protocol.port;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.ByteBuffer;

/**
 * Test frames: Ethernet (optionally one 802.1Q tag) + IPv4 or IPv6 + UDP to port 4791, with a sequence number as
 * the first payload word, so a receiver can tell them apart and find them again.
 */
final class IpFrames
{
    static final int UDP_PORT = 4791;

    private IpFrames()
    {
    }

    static byte[] frame(final InetAddress source, final InetAddress destination, final int sequence, final boolean vlan)
    {
        final boolean v4 = source instanceof Inet4Address;
        final int ethernet = vlan ? 18 : 14;
        final int ip = v4 ? 20 : 40;
        final int payload = 64;
        final ByteBuffer b = ByteBuffer.allocate(ethernet + ip + 8 + payload);
        b.put(new byte[] { 0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01 });
        if (vlan)
        {
            b.putShort((short)0x8100).putShort((short)7);
        }
        b.putShort((short)(v4 ? 0x0800 : 0x86DD));
        if (v4)
        {
            b.put((byte)0x45).put((byte)0).putShort((short)(ip + 8 + payload)).putShort((short)sequence)
                .putShort((short)0x4000).put((byte)64).put((byte)17).putShort((short)0);
        }
        else
        {
            b.putInt(0x60000000).putShort((short)(8 + payload)).put((byte)17).put((byte)64);
        }
        b.put(source.getAddress()).put(destination.getAddress());
        b.putShort((short)UDP_PORT).putShort((short)UDP_PORT).putShort((short)(8 + payload)).putShort((short)0);
        b.putInt(sequence);
        return b.array();
    }

    /**
     * {@link #frame} whose UDP payload's second word is the BTH's: a reserved byte, then the destination QP.
     */
    static byte[] frameToQp(final InetAddress source, final InetAddress destination, final int sequence,
        final boolean vlan, final int reserved, final int destQp)
    {
        final byte[] frame = frame(source, destination, sequence, vlan);
        final int payload = (vlan ? 18 : 14) + (source instanceof Inet4Address ? 20 : 40) + 8;
        ByteBuffer.wrap(frame).putInt(payload + 4, (reserved << 24) | (destQp & 0xFF_FFFF));
        return frame;
    }

    /**
     * @return the sequence number of a frame built by {@link #frame} (untagged once received), or -1.
     */
    static int sequence(final byte[] frame)
    {
        final ByteBuffer b = ByteBuffer.wrap(frame);
        if (frame.length < 14)
        {
            return -1;
        }
        final int type = b.getShort(12) & 0xFFFF;
        final int at = switch (type)
        {
            case 0x0800 -> 14 + 20 + 8;
            case 0x86DD -> 14 + 40 + 8;
            default -> -1;
        };
        if (at < 0 || frame.length < at + 4 || (b.getShort(at - 8) & 0xFFFF) != UDP_PORT)
        {
            return -1;
        }
        return b.getInt(at);
    }
}
