package io.netreduce.host.switchml;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * SwitchML's block fixed point for fp32 (paper §4, "Quantized integer-based aggregation", Appendix E; the published
 * client's {@code cpu_exponent_quantizer} prepostprocessor): a packet's block of floats travels as int32 scaled by
 * one factor that all W workers share, chosen so that W contributions cannot overflow the switch's int32 sum.
 * <ul>
 *   <li><b>Block exponent</b> ({@link #exponent}): the IEEE exponent field of the block's largest magnitude minus 126,
 *       so that every |x| of the block is <em>strictly</em> below 2<sup>e</sup> (a power of two itself gets the next
 *       exponent). An all-zero or all-denormal block has e = {@value #MIN_EXPONENT}. The client computes it the same
 *       way. Values of 2<sup>127</sup> and more, infinities and NaN have none ({@link #requireQuantizable}).</li>
 *   <li><b>Scale</b> ({@link #scale}): S(e) = (2<sup>31</sup> − 1) / (W · 2<sup>e</sup>), with e the maximum of the W
 *       workers' block exponents (which the switch computes). Since |x| ≤ (1 − 2<sup>−24</sup>) · 2<sup>e</sup> for
 *       a float below 2<sup>e</sup>, each |x·S| ≤ (2<sup>31</sup> − 1)/W − 2<sup>7</sup>/W, so each rounded
 *       contribution is at most (2<sup>31</sup> − 1)/W − 1 in magnitude for W ≤ {@value #MAX_WORKERS}: the sum of W of
 *       them never wraps.
 *       Computed in double (the client stores it in a float, which overflows to infinity for e below about −97).</li>
 *   <li><b>Quantize</b>: q = rint(x · S) (round half to even, as the client's vector path does).
 *       <b>Dequantize</b>: the switch's sum Q times W · 2<sup>e</sup> / (2<sup>31</sup> − 1), in double, rounded to
 *       float.</li>
 * </ul>
 * <b>Error bound</b> ({@link #errorBound}), per element, against the exact real sum Σx of the W inputs:
 * <pre>
 *   |result − Σx| ≤ (1 + 2^−18) · W² · 2^(e−1) / (2^31 − 1)  +  2^−24 · |Σx|  +  2^−150
 * </pre>
 * The first term is W roundings to the nearest integer (each at most 1/2, so W/2 in the sum's fixed point, whose unit
 * is W · 2<sup>e</sup> / (2<sup>31</sup> − 1)); the factor 1 + 2<sup>−18</sup> covers the double arithmetic (scaling,
 * product, dequantization: each relatively 2<sup>−53</sup> of a value below W · 2<sup>e</sup>) and the final rounding
 * of that term. The second term is the rounding of the result to float (half an ulp, relatively 2<sup>−24</sup>),
 * the third that rounding where the result is subnormal (half of 2<sup>−149</sup>). A float64 sum of the W inputs
 * is within W · 2<sup>e−53</sup> of Σx, well inside the first term's slack, so checks may compare with it.
 * A result beyond {@link Float#MAX_VALUE} becomes infinite, as float addition's would.
 * <p>
 * Stateless apart from W; allocation-free.
 */
public final class ExponentQuantizer
{
    /** The block exponent of an all-zero or all-denormal block: every denormal is below 2<sup>−126</sup>. */
    public static final int MIN_EXPONENT = -126;
    /** The largest block exponent an int8 carries: blocks whose largest magnitude is below 2<sup>127</sup>. */
    public static final int MAX_EXPONENT = 127;
    /**
     * What a packet carries when it looks ahead to no block (the last packets of a call): the smallest int8, so the
     * switch's maximum of the workers' exponents ignores it.
     */
    public static final int NO_EXPONENT = Byte.MIN_VALUE;
    /**
     * Workers one scale serves here: the margin of 2<sup>7</sup>/W per contribution (above) must be at least the
     * rounding's 1/2 plus one, so that a contribution stays below ⌊(2<sup>31</sup> − 1)/W⌋, which makes
     * {@link #quantize}'s overflow check exact. The appliance's limit (its 64-bit bitmaps) is the same.
     */
    public static final int MAX_WORKERS = 64;

    private static final double INT32_MAX = Integer.MAX_VALUE;
    /** The raw bits of 2^127 without sign: any magnitude at or above it has no int8 block exponent. */
    private static final int TOO_LARGE_BITS = 0x7F00_0000;
    private static final double DOUBLE_SLACK = 0x1.0p-18;
    private static final double FLOAT_ROUNDING = 0x1.0p-24;
    private static final double SUBNORMAL_ROUNDING = 0x1.0p-150;

    private final int workers;

    /**
     * @param workers W, the number of workers whose quantized blocks the switch adds.
     */
    public ExponentQuantizer(final int workers)
    {
        if (workers < 1 || workers > MAX_WORKERS)
        {
            throw new IllegalArgumentException("SwitchML fp32 needs 1.." + MAX_WORKERS + " workers: " + workers);
        }
        this.workers = workers;
    }

    public int workers()
    {
        return workers;
    }

    /**
     * @throws IllegalArgumentException naming the first element that is NaN, infinite or of magnitude 2<sup>127</sup>
     *                                  or more: it has no block exponent (nor would W of them have a float sum).
     */
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

    /**
     * @return the block exponent of {@code values[from, from + count)}: every |x| is below 2<sup>e</sup>;
     *         {@value #MIN_EXPONENT} for a block of zeros and denormals (or an empty one).
     * @throws IllegalArgumentException if a value has none ({@link #requireQuantizable}).
     */
    public static int exponent(final float[] values, final int from, final int count)
    {
        // Without the sign, the bits of non-NaN floats order as their magnitudes.
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

    /**
     * @return S(e) = (2<sup>31</sup> − 1) / (W · 2<sup>e</sup>), the factor every worker multiplies its block by.
     */
    public double scale(final int exponent)
    {
        return Math.scalb(INT32_MAX / workers, -exponent);
    }

    /**
     * @return 1 / S(e) = W · 2<sup>e</sup> / (2<sup>31</sup> − 1), the value of one unit of the summed block.
     */
    public double unit(final int exponent)
    {
        return Math.scalb(workers / INT32_MAX, exponent);
    }

    /**
     * Write {@code values[from, from + count)} times S({@code exponent}), rounded, as big-endian int32 at {@code at}.
     *
     * @param exponent the block's exponent across all workers: at least the block's own {@link #exponent}.
     * @throws IllegalStateException if a value does not fit the scale (the exponent is below the block's own): the
     *                               sum could wrap. Elements before it have been written.
     */
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

    /**
     * Read {@code count} big-endian int32 sums at {@code at} and store them, times 1 / S({@code exponent}) and rounded
     * to float, in {@code values[from, from + count)}.
     */
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

    /**
     * @param exponent the block's exponent across the workers (the maximum of theirs).
     * @param exactSum the exact sum of the W inputs at the element (a float64 sum is close enough; see above).
     * @return how far the element's result may be from {@code exactSum}: (1 + 2<sup>−18</sup>) · W² ·
     *         2<sup>e−1</sup> / (2<sup>31</sup> − 1) + 2<sup>−24</sup> · |Σx| + 2<sup>−150</sup>.
     */
    public double errorBound(final int exponent, final double exactSum)
    {
        final double quantization = Math.scalb((double)workers * workers / INT32_MAX, exponent - 1);
        return quantization * (1 + DOUBLE_SLACK) + FLOAT_ROUNDING * Math.abs(exactSum) + SUBNORMAL_ROUNDING;
    }
}
