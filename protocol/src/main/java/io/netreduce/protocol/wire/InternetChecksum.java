package io.netreduce.protocol.wire;

/**
 * The Internet checksum's arithmetic (RFC 1071), one place for the IPv4 header's ({@link Ipv4Header}) and the L4
 * checksums' ({@link L4Checksum}): a sum of 16-bit words folded to 16 bits with its end-around carries, and the
 * checksum, that sum complemented. Sums of 16-bit or 32-bit big-endian words fold to the same value.
 */
final class InternetChecksum
{
    private InternetChecksum()
    {
    }

    /**
     * @return {@code sum} folded to 16 bits, each carry out of the low 16 bits added back in.
     */
    static int fold(final long sum)
    {
        long folded = sum;
        while ((folded >>> 16) != 0)
        {
            folded = (folded & 0xFFFF) + (folded >>> 16);
        }
        return (int)folded;
    }

    /**
     * @return the checksum of words summing to {@code sum}: their folded sum, complemented.
     */
    static int complement(final long sum)
    {
        return ~fold(sum) & 0xFFFF;
    }
}
