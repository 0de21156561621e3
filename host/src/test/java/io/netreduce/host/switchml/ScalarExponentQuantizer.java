package io.netreduce.host.switchml;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * The reference for {@link ExponentQuantizer}: its element-by-element version as it was before the Vector API one
 * (same double arithmetic, Agrona's big-endian accessors), kept to check that the vector version gives the same bits
 * ({@code ExponentQuantizerEquivalenceTest}) and to measure it against ({@code QuantizerBenchmark}).
 */
public final class ScalarExponentQuantizer
{
    private static final double INT32_MAX = Integer.MAX_VALUE;
    private static final int TOO_LARGE_BITS = 0x7F00_0000;

    private final int workers;

    public ScalarExponentQuantizer(final int workers)
    {
        this.workers = workers;
    }

    public static void requireQuantizable(final float[] values, final int from, final int count)
    {
        for (int i = from; i < from + count; i++)
        {
            if ((Float.floatToRawIntBits(values[i]) & 0x7FFF_FFFF) >= TOO_LARGE_BITS)
            {
                throw new IllegalArgumentException("element " + i + " is " + values[i] + ": SwitchML's block fixed " +
                    "point carries only finite floats of magnitude below 2^127 (about 1.7e38)");
            }
        }
    }

    public static int exponent(final float[] values, final int from, final int count)
    {
        int largest = 0;
        for (int i = from; i < from + count; i++)
        {
            largest = Math.max(largest, Float.floatToRawIntBits(values[i]) & 0x7FFF_FFFF);
        }
        if (largest >= TOO_LARGE_BITS)
        {
            requireQuantizable(values, from, count);
        }
        return (largest >>> 23) - 126;
    }

    public double scale(final int exponent)
    {
        return Math.scalb(INT32_MAX / workers, -exponent);
    }

    public double unit(final int exponent)
    {
        return Math.scalb(workers / INT32_MAX, exponent);
    }

    public void quantize(
        final float[] values, final int from, final int count, final int exponent, final MutableDirectBuffer buffer,
        final int at)
    {
        final double scale = scale(exponent);
        final int limit = Integer.MAX_VALUE / workers;
        for (int i = 0; i < count; i++)
        {
            final int q = (int)Math.rint(values[from + i] * scale);
            if (q >= limit || q <= -limit)
            {
                throw new IllegalStateException("element " + (from + i) + " (" + values[from + i] + ") is not below " +
                    "2^" + exponent + ", the block's exponent across the workers: the switch's maximum of the " +
                    "exponents is below this worker's");
            }
            buffer.putInt(at + i * Integer.BYTES, q, BIG_ENDIAN);
        }
    }

    public void dequantize(
        final DirectBuffer buffer, final int at, final int count, final int exponent, final float[] values,
        final int from)
    {
        final double unit = unit(exponent);
        for (int i = 0; i < count; i++)
        {
            values[from + i] = (float)(buffer.getInt(at + i * Integer.BYTES, BIG_ENDIAN) * unit);
        }
    }
}
