package io.netreduce.dataplane.support;

import io.netreduce.protocol.element.ElementType;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;

/**
 * Ring configurations for tests: rank r lives at 10.0.0.(r+1) (or fd00::(r+1)).
 */
public final class Rings
{
    private Rings()
    {
    }

    public static RingDefinition ring(
        final int ringId, final int ranks, final ElementType type, final int window, final int msgLen,
        final int payloadSize)
    {
        return ring(ringId, ranks, type, window, msgLen, payloadSize, false);
    }

    public static RingDefinition ring(
        final int ringId, final int ranks, final ElementType type, final int window, final int msgLen,
        final int payloadSize, final boolean ipv6)
    {
        final List<RingMember> members = new ArrayList<>();
        for (int r = 0; r < ranks; r++)
        {
            members.add(new RingMember(r, address(r, ipv6)));
        }
        return new RingDefinition(ringId, "job-" + ringId, type, window, msgLen, payloadSize, members);
    }

    public static InetAddress address(final int rank, final boolean ipv6)
    {
        try
        {
            if (ipv6)
            {
                final byte[] bytes = new byte[16];
                bytes[0] = (byte)0xFD;
                bytes[15] = (byte)(rank + 1);
                return InetAddress.getByAddress(bytes);
            }
            return InetAddress.getByAddress(new byte[]{ 10, 0, 0, (byte)(rank + 1) });
        }
        catch (final UnknownHostException ex)
        {
            throw new IllegalStateException(ex);
        }
    }
}
