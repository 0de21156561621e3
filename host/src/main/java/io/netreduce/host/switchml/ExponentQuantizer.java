package io.netreduce.host.switchml;

import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.lang.foreign.MemorySegment;

import static java.nio.ByteOrder.BIG_ENDIAN;
import static java.nio.ByteOrder.LITTLE_ENDIAN;

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
 * <b>Implementation.</b> The Vector API, with the same arithmetic as the element-by-element definition above, so
 * the bits are those of a scalar loop ({@code ScalarExponentQuantizer} in the tests, the earlier version, checked
 * against it in {@code ExponentQuantizerEquivalenceTest}): the exponent is a lane-wise maximum of the magnitudes'
 * bits; quantizing widens floats to double lanes (exact), multiplies by the double S and adds 1.5 · 2<sup>52</sup>,
 * which leaves rint(x·S), half to even, as two's complement in the low 32 bits (exact for |x·S| below
 * 2<sup>51</sup>), narrows those to int32 and stores them big-endian in place; dequantizing widens the int32 sums to
 * double, multiplies by the double unit and rounds to float. The overflow check is one comparison per block: since
 * rounding is monotonic, a block whose largest magnitude times S is below the limit has no element above it; any other
 * block (and one holding NaN) takes the scalar loop, which throws at the element as before. Steps of the preferred
 * double species' lanes (8 with AVX-512, 4 with AVX2), the rest of a block by the scalar loop; byte order is swapped
 * lane-wise around little-endian loads and stores (a big-endian vector store measured 3x slower). About 6x the scalar
 * version's packets per second on the 2-core bed ({@code QuantizerBenchmark}, W = 4, 256 and 2048 elements; noisy).
 * <p>
 * Keeps W and a view of the last buffer each way ({@link BufferSegments}); allocation-free once those are made.
 * Not thread-safe: one per worker.
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

    /** Added to a double below 2^51 in magnitude, leaves it rounded to an integer (half to even) in the low bits. */
    private static final double ROUNDING = 0x1.8p52;
    /** The double lanes of a step; the floats and ints of a step fill half their shape (same lane count). */
    private static final VectorSpecies<Double> DOUBLES = DoubleVector.SPECIES_PREFERRED.vectorBitSize() >= 128 ?
        DoubleVector.SPECIES_PREFERRED : DoubleVector.SPECIES_128;
    private static final VectorSpecies<Float> FLOATS =
        VectorSpecies.of(float.class, VectorShape.forBitSize(DOUBLES.vectorBitSize() / 2));
    private static final VectorSpecies<Integer> INTS =
        VectorSpecies.of(int.class, VectorShape.forBitSize(DOUBLES.vectorBitSize() / 2));
    /** The exponent scan: magnitudes' bits, a full vector of them at a time. */
    private static final VectorSpecies<Float> SCAN_FLOATS = FloatVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Integer> SCAN_INTS = IntVector.SPECIES_PREFERRED;

    private final int workers;
    private final BufferSegments encoded = new BufferSegments();
    private final BufferSegments decoded = new BufferSegments();

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
        if (largestMagnitudeBits(values, from, count) >= TOO_LARGE_BITS)
        {
            for (int i = from; i < from + count; i++)
            {
                if ((Float.floatToRawIntBits(values[i]) & 0x7FFF_FFFF) >= TOO_LARGE_BITS)
                {
                    throw new IllegalArgumentException("element " + i + " is " + values[i] + ": SwitchML's block " +
                        "fixed point carries only finite floats of magnitude below 2^127 (about 1.7e38)");
                }
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
        final int largest = largestMagnitudeBits(values, from, count);
        if (largest >= TOO_LARGE_BITS)
        {
            requireQuantizable(values, from, count);
        }
        return (largest >>> 23) - 126;
    }

    /**
     * @return the largest of the elements' raw bits without sign: without the sign, the bits of non-NaN floats order
     *         as their magnitudes (NaN above infinity); 0 for no elements.
     */
    private static int largestMagnitudeBits(final float[] values, final int from, final int count)
    {
        final int lanes = SCAN_INTS.length();
        final int upper = count - count % lanes;
        IntVector largest = IntVector.zero(SCAN_INTS);
        int i = 0;
        for (; i < upper; i += lanes)
        {
            largest = largest.max(FloatVector.fromArray(SCAN_FLOATS, values, from + i).reinterpretAsInts()
                .and(0x7FFF_FFFF));
        }
        int result = largest.reduceLanes(VectorOperators.MAX);
        for (; i < count; i++)
        {
            result = Math.max(result, Float.floatToRawIntBits(values[from + i]) & 0x7FFF_FFFF);
        }
        return result;
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
        // Below this |x·S| rounds to at most limit − 1: no check is due (a valid block stays below (2^31 − 1)/W − 1).
        final double safe = limit - 1;
        final MemorySegment segment = encoded.of(buffer);
        final int lanes = DOUBLES.length();
        // Rounding is monotonic: if the largest magnitude times S is below the limit, every element's is (NaN is not
        // below it). Otherwise the scalar loop does the block and throws at the element (or makes NaN 0) as before.
        final boolean fits = Float.intBitsToFloat(largestMagnitudeBits(values, from, count)) * scale < safe;
        final int upper = fits ? count - count % lanes : 0;
        int i = 0;
        for (; i < upper; i += lanes)
        {
            // x·S + 1.5·2^52 has the integer rint(x·S) in its low mantissa bits, two's complement in the low 32.
            // Bytes reversed lane-wise and stored little-endian: big-endian, and much faster than a big-endian store.
            ((IntVector)((DoubleVector)FloatVector.fromArray(FLOATS, values, from + i)
                .convertShape(VectorOperators.F2D, DOUBLES, 0)).mul(scale).add(ROUNDING).reinterpretAsLongs()
                .convertShape(VectorOperators.L2I, INTS, 0)).lanewise(VectorOperators.REVERSE_BYTES)
                .intoMemorySegment(segment, at + (long)i * Integer.BYTES, LITTLE_ENDIAN);
        }
        for (; i < count; i++)
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
        final MemorySegment segment = decoded.of(buffer);
        final int lanes = DOUBLES.length();
        final int upper = count - count % lanes;
        int i = 0;
        for (; i < upper; i += lanes)
        {
            final DoubleVector sums = (DoubleVector)IntVector.fromMemorySegment(INTS, segment,
                at + (long)i * Integer.BYTES, LITTLE_ENDIAN).lanewise(VectorOperators.REVERSE_BYTES)
                .convertShape(VectorOperators.I2D, DOUBLES, 0);
            ((FloatVector)sums.mul(unit).convertShape(VectorOperators.D2F, FLOATS, 0)).intoArray(values, from + i);
        }
        for (; i < count; i++)
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
