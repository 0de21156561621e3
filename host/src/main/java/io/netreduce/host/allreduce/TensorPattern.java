package io.netreduce.host.allreduce;

import io.netreduce.protocol.element.ElementType;

/**
 * Deterministic tensor contents from (seed, rank, iteration, index): any process can regenerate every rank's
 * input, so each worker checks its result against the exact sum without exchanging data. Values are finite:
 * floats uniform in [-1, 1) rounded to the type, int32 any 32-bit value (sums wrap, exactly).
 */
public final class TensorPattern
{
    private TensorPattern()
    {
    }

    /**
     * @return raw element bits (fp16/bf16 in the low 16 bits).
     */
    public static int bits(
        final ElementType type, final long seed, final int rank, final int iteration, final int index)
    {
        final long h = mix(seed * 0x9E37_79B9_7F4A_7C15L + ((long)rank << 40) + ((long)iteration << 20) ^ 0x5851_F42DL,
            index);
        if (type == ElementType.INT32)
        {
            return (int)(h >>> 32);
        }
        final float value = ((h >>> 40) - (1 << 23)) * 0x1.0p-23f;
        return Arithmetic.fromFloat(type, value);
    }

    /**
     * Fill a tensor with rank {@code rank}'s input for {@code iteration}.
     */
    public static void fill(final Tensor tensor, final long seed, final int rank, final int iteration)
    {
        final ElementType type = tensor.type();
        for (int i = 0; i < tensor.elements(); i++)
        {
            Arithmetic.put(tensor, i, bits(type, seed, rank, iteration, i));
        }
    }

    private static long mix(final long stream, final int index)
    {
        long z = stream + (index + 1L) * 0x9E37_79B9_7F4A_7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58_476D_1CE4_E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D0_49BB_1331_11EBL;
        return z ^ (z >>> 31);
    }
}
