package io.netreduce.host.switchml;

import java.math.BigDecimal;
import java.util.SplittableRandom;

/**
 * fp32 tensors that exercise SwitchML's block fixed point, and the check of a result against the exact sum. Block b
 * (elements [b·k, (b+1)·k)) is, by b mod 8: uniform in [-1, 1); all zeros; denormals and zeros of both signs; around
 * ±1e30; around ±1e-30; mixed magnitudes (1e6, 1e-6, powers of two, zeros) within the block; negative values with
 * worker 0's block all zeros; each worker 2^10 times larger than the one before (up to 2^70).
 */
final class Fp32Inputs
{
    private Fp32Inputs()
    {
    }

    static float[][] tensors(final int workers, final int n, final int k, final long seed)
    {
        final SplittableRandom random = new SplittableRandom(seed);
        final float[][] tensors = new float[workers][n];
        for (int w = 0; w < workers; w++)
        {
            for (int i = 0; i < n; i++)
            {
                tensors[w][i] = value(random, w, (i / k) % 8, i);
            }
        }
        return tensors;
    }

    private static float value(final SplittableRandom random, final int w, final int kind, final int i)
    {
        final float uniform = (float)(random.nextDouble() * 2 - 1);
        return switch (kind)
        {
            case 0 -> uniform;
            case 1 -> 0.0f;
            case 2 -> i % 3 == 0 ? (i % 2 == 0 ? 0.0f : -0.0f) :
                Float.intBitsToFloat(random.nextInt(1, 0x80_0000) | (random.nextBoolean() ? 0x8000_0000 : 0));
            case 3 -> uniform * 1e30f;
            case 4 -> uniform * 1e-30f;
            case 5 -> switch (i % 4)
            {
                case 0 -> uniform * 1e6f;
                case 1 -> uniform * 1e-6f;
                case 2 -> Math.scalb(1.0f, random.nextInt(-20, 20)) * (random.nextBoolean() ? 1 : -1);
                default -> 0.0f;
            };
            case 6 -> w == 0 ? 0.0f : -Math.abs(uniform);
            default -> Math.scalb(uniform, 10 * (w % 8));
        };
    }

    /**
     * @return the block exponent across the workers of the block holding element {@code i}: the maximum of theirs.
     */
    static int blockExponent(final float[][] inputs, final int i, final int k)
    {
        final int block = i / k;
        final int count = Math.min(k, inputs[0].length - block * k);
        int exponent = Integer.MIN_VALUE;
        for (final float[] input : inputs)
        {
            exponent = Math.max(exponent, ExponentQuantizer.exponent(input, block * k, count));
        }
        return exponent;
    }

    /**
     * @return the exact sum of the workers' element {@code i}.
     */
    static BigDecimal exactSum(final float[][] inputs, final int i)
    {
        BigDecimal sum = BigDecimal.ZERO;
        for (final float[] input : inputs)
        {
            sum = sum.add(new BigDecimal(input[i]));
        }
        return sum;
    }

    /**
     * @return null if every element of {@code result} is within {@link ExponentQuantizer#errorBound} of the exact sum,
     *         else the first that is not.
     */
    static String outsideBound(final float[][] inputs, final float[] result, final int k)
    {
        final ExponentQuantizer quantizer = new ExponentQuantizer(inputs.length);
        for (int i = 0; i < result.length; i++)
        {
            final BigDecimal exact = exactSum(inputs, i);
            final int exponent = blockExponent(inputs, i, k);
            final double bound = quantizer.errorBound(exponent, exact.doubleValue());
            final BigDecimal error = new BigDecimal(result[i]).subtract(exact).abs();
            if (Float.isNaN(result[i]) || error.compareTo(new BigDecimal(bound)) > 0)
            {
                return "element " + i + ": " + result[i] + ", exact sum " + exact + ", error " + error.doubleValue() +
                    " > bound " + bound + " (block exponent " + exponent + ")";
            }
        }
        return null;
    }
}
