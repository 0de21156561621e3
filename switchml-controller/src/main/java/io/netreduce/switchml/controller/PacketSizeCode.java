package io.netreduce.switchml.controller;

/**
 * The UdpSession request's packet size: the published client's {@code PacketSize} enum, {@code MTU_128} (0) to
 * {@code MTU_1024} (3), which is 32 &lt;&lt; code int32 elements per packet (it sends code 1 for 64 elements and 3 for
 * 256, what the Tofino serves). Codes 4 to 6 (512, 1024 and 2048 elements) are netreduce's own, for workers that need
 * no Tofino: proto3 carries an enum value the client's schema does not name as it is.
 */
public final class PacketSizeCode
{
    /** The largest code the appliance serves: 2048 elements. */
    public static final int MAX = 6;

    private PacketSizeCode()
    {
    }

    /**
     * @return elements per packet of {@code code} (0..{@link #MAX}).
     */
    public static int elementsOf(final int code)
    {
        if (code < 0 || code > MAX)
        {
            throw new IllegalArgumentException("packet size code " + code + " is not 0.." + MAX);
        }
        return 32 << code;
    }

    /**
     * @return the code of {@code elements} per packet.
     * @throws IllegalArgumentException unless it is a power of two from 32 to 2048.
     */
    public static int of(final int elements)
    {
        if (Integer.bitCount(elements) != 1 || elements < 32 || elements > 32 << MAX)
        {
            throw new IllegalArgumentException(elements + " elements per packet has no session packet size code " +
                "(powers of two from 32 to " + (32 << MAX) + ")");
        }
        return Integer.numberOfTrailingZeros(elements) - 5;
    }
}
