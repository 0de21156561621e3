package io.netreduce.protocol.icrc;

/**
 * CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320) arithmetic in GF(2): combining the CRCs of two
 * adjacent byte ranges without reading them again.
 * <p>
 * {@code crc(A || B) = multiply(shiftOperator(|B|), crc(A)) ^ crc(B)} for the standard (pre- and
 * post-inverted) CRC-32 as {@link java.util.zip.CRC32} computes it. The aggregator uses this to compute
 * one result payload's CRC once and combine it with each connection's own header CRC. Polynomials are held
 * reflected: bit 31 is x^0.
 */
public final class Crc32Combine
{
    private static final int POLYNOMIAL = 0xEDB8_8320;
    /** x^0 in the reflected representation. */
    private static final int ONE = 0x8000_0000;
    /** X2N[k] = x^(2^k) mod p. */
    private static final int[] X2N = new int[32];

    static
    {
        int p = 1 << 30; // x^1
        X2N[0] = p;
        for (int k = 1; k < 32; k++)
        {
            p = multiply(p, p);
            X2N[k] = p;
        }
    }

    private Crc32Combine()
    {
    }

    /**
     * @return a * b mod p, both reflected.
     */
    public static int multiply(final int a, final int b)
    {
        int m = ONE;
        int product = 0;
        int shifted = b;
        int remaining = a;
        while (remaining != 0)
        {
            if ((remaining & m) != 0)
            {
                product ^= shifted;
                remaining &= ~m;
            }
            m >>>= 1;
            shifted = (shifted & 1) != 0 ? (shifted >>> 1) ^ POLYNOMIAL : shifted >>> 1;
        }
        return product;
    }

    /**
     * @return x^(8 * length) mod p: the operator that moves a CRC past {@code length} bytes.
     */
    public static int shiftOperator(final long length)
    {
        int p = ONE;
        long n = length;
        int k = 3; // 2^3 bits per byte
        while (n != 0)
        {
            if ((n & 1) != 0)
            {
                p = multiply(X2N[k & 31], p);
            }
            n >>>= 1;
            k++;
        }
        return p;
    }

    /**
     * @return crc(A || B) given crc(A), crc(B) and |B|.
     */
    public static int combine(final int crcA, final int crcB, final long lengthB)
    {
        return multiply(shiftOperator(lengthB), crcA) ^ crcB;
    }

    /**
     * As {@link #combine(int, int, long)} with a precomputed {@link #shiftOperator(long)} for |B|.
     */
    public static int combineWithOperator(final int crcA, final int crcB, final int shiftOperator)
    {
        return multiply(shiftOperator, crcA) ^ crcB;
    }
}
