package io.netreduce.worker;

import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteOrder;

/**
 * The seeded byte pattern write-bw sends and checks: every 8-byte word is a SplitMix64 hash of the seed and the
 * word's index in the whole transfer, so any misplaced, stale or corrupted byte shows up.
 */
final class Pattern
{
    private Pattern()
    {
    }

    static long word(final long seed, final long wordIndex)
    {
        long z = seed + (wordIndex + 1) * 0x9E37_79B9_7F4A_7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58_476D_1CE4_E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D0_49BB_1331_11EBL;
        return z ^ (z >>> 31);
    }

    /**
     * Fill {@code [offset, offset + length)}; {@code offset} is also the position in the transfer.
     */
    static void fill(final UnsafeBuffer buffer, final int offset, final int length, final long seed)
    {
        final int end = offset + length;
        int i = offset;
        for (; i + 8 <= end; i += 8)
        {
            buffer.putLong(i, word(seed, i >>> 3), ByteOrder.LITTLE_ENDIAN);
        }
        for (; i < end; i++)
        {
            buffer.putByte(i, (byte)(word(seed, i >>> 3) >>> ((i & 7) * 8)));
        }
    }

    /**
     * @return the offset of the first byte that differs from the pattern, or -1.
     */
    static long firstMismatch(final UnsafeBuffer buffer, final int offset, final int length, final long seed)
    {
        final int end = offset + length;
        int i = offset;
        for (; i + 8 <= end && (i & 7) == 0; i += 8)
        {
            if (buffer.getLong(i, ByteOrder.LITTLE_ENDIAN) != word(seed, i >>> 3))
            {
                break;
            }
        }
        for (; i < end; i++)
        {
            if (buffer.getByte(i) != (byte)(word(seed, i >>> 3) >>> ((i & 7) * 8)))
            {
                return i;
            }
        }
        return -1;
    }
}
