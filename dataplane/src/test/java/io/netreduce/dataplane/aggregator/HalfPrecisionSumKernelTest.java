package io.netreduce.dataplane.aggregator;

import io.netreduce.dataplane.ring.ElementType;
import io.netreduce.dataplane.testing.SeededCases;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorSpecies;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

/**
 * The Vector API fp16 and bf16 kernels against the scalar kernel they replaced ({@link ScalarSumKernel}), bit for
 * bit, on hostile inputs: NaNs (quiet, signalling, with payloads, both signs), infinities, subnormals, signed
 * zeros, sums that overflow to infinity, land in the fp16 subnormal range or sit exactly on a rounding tie.
 * <p>
 * One caveat, from IEEE 754 and the JLS rather than the kernels: when two NaNs meet in an addition, which one's
 * sign and payload survives depends on the operand order the JIT picks, so the scalar reference is not itself
 * deterministic there. An element whose result is NaN must match bit for bit when at most one NaN can reach the
 * sum (no NaN input; or one NaN input and no infinite input, since NaNs from non-NaN inputs need an infinity);
 * otherwise both results must be NaN.
 */
class HalfPrecisionSumKernelTest
{
    private static final ValueLayout.OfShort SHORT_LE =
        ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final VectorSpecies<Integer> INTS = IntVector.SPECIES_PREFERRED;
    /** Elements per vector iteration of the kernels (two per int lane). */
    private static final int VECTOR_ELEMENTS = INTS.vectorByteSize() / 2;

    private static final short[] FP16_SPECIALS = {
        0x0000, (short)0x8000, 0x7C00, (short)0xFC00, 0x7E00, (short)0xFE00, 0x7C01, (short)0xFD55, 0x7FFF,
        0x0001, (short)0x8001, 0x03FF, (short)0x83FF, 0x0400, (short)0x8400, 0x7BFF, (short)0xFBFF, 0x3C00,
        (short)0xBC00, 0x3BFF, 0x0200 };
    private static final short[] BF16_SPECIALS = {
        0x0000, (short)0x8000, 0x7F80, (short)0xFF80, 0x7FC0, (short)0xFFC0, 0x7F81, (short)0xFFA5, 0x7FFF,
        0x0001, (short)0x8001, 0x007F, (short)0x807F, 0x0080, (short)0x8080, 0x7F7F, (short)0xFF7F, 0x3F80,
        (short)0xBF80, 0x3F7F, 0x0040 };

    private long strictNans;
    private long ties;

    @Test
    void shouldMatchTheScalarKernelBitForBitOnHostileInputs()
    {
        // Cold (interpreter and C1 run the Vector API's Java fallback), then again once C2 has compiled the
        // kernels with real vector instructions.
        SeededCases.run("fp16/bf16 vector kernel vs scalar, cold", 1_000, (random, index) ->
            checkCase(index % 2 == 0 ? ElementType.FP16 : ElementType.BF16, random));
        warmUp();
        SeededCases.run("fp16/bf16 vector kernel vs scalar, compiled", 1_000, (random, index) ->
            checkCase(index % 2 == 0 ? ElementType.FP16 : ElementType.BF16, random));
        // The generator must really have produced what the comparison claims to cover.
        assertThat(strictNans).as("NaN results compared bit for bit").isPositive();
        assertThat(ties).as("sums exactly on a rounding tie").isPositive();
    }

    /**
     * Enough calls on aggregator-sized data for C2 to compile both kernels (checked with -XX:+PrintCompilation).
     */
    private static void warmUp()
    {
        final int ranks = 8;
        final int length = 4096;
        final MemorySegment segment = MemorySegment.ofArray(new byte[length * (ranks + 1)]);
        final SplittableRandom random = new SplittableRandom(1);
        for (int i = 0; i < length * ranks; i += 2)
        {
            segment.set(SHORT_LE, i, (short)(0x3C00 + random.nextInt(0x400)));
        }
        for (int i = 0; i < 15_000; i++)
        {
            SumKernel.sum(ElementType.FP16, segment, 0, length, ranks, (long)length * ranks, length);
            SumKernel.sum(ElementType.BF16, segment, 0, length, ranks, (long)length * ranks, length);
        }
    }

    @Test
    void shouldWidenEveryFloat16ExactlyAsTheJdk()
    {
        final int lanes = INTS.length();
        final int[] pairs = new int[lanes];
        for (int h = 0; h < 0x1_0000; h += 2 * lanes)
        {
            for (int l = 0; l < lanes; l++)
            {
                pairs[l] = (h + 2 * l) | (h + 2 * l + 1) << 16;
            }
            final IntVector v = IntVector.fromArray(INTS, pairs, 0);
            final int[] even = SumKernel.widenFloat16(v.and(0x7FFF), v.lanewise(
                jdk.incubator.vector.VectorOperators.LSHL, 16)).reinterpretAsInts().toArray();
            final int[] odd = SumKernel.widenFloat16(v.lanewise(jdk.incubator.vector.VectorOperators.LSHR, 16)
                .and(0x7FFF), v).reinterpretAsInts().toArray();
            for (int l = 0; l < lanes; l++)
            {
                assertWidened(h + 2 * l, even[l]);
                assertWidened(h + 2 * l + 1, odd[l]);
            }
        }
    }

    @Test
    void shouldNarrowToFloat16AsTheJdkOverTheWholeFloatRange()
    {
        // Every exponent and sign with many significands: the top 19 bits exhaustively, the low 13 (the rounded-off
        // part) from a seeded random plus the tie and its neighbours.
        final long seed = SeededCases.baseSeed();
        final SplittableRandom random = new SplittableRandom(seed);
        final int lanes = INTS.length();
        final int[] bits = new int[lanes];
        final int[] lows = { 0x0000, 0x0FFF, 0x1000, 0x1001, 0x1FFF };
        for (int top = 0; top < 1 << 19; top++)
        {
            for (int l = 0; l < lanes; l++)
            {
                final int low = l < lows.length ? lows[l] : random.nextInt(1 << 13);
                bits[l] = top << 13 | low;
            }
            final int[] narrowed = SumKernel.narrowToFloat16(IntVector.fromArray(INTS, bits, 0)).toArray();
            for (int l = 0; l < lanes; l++)
            {
                final float value = Float.intBitsToFloat(bits[l]);
                // Only quiet NaNs with nothing in the low 13 bits reach the rounding: every NaN there comes from
                // widened fp16 or is the default NaN, and has been through at least one addition, which quiets
                // it. On the others the JDK's intrinsic (it quiets) and its Java code (it does not) disagree.
                if (Float.isNaN(value) && ((bits[l] & 0x1FFF) != 0 || (bits[l] & 0x0040_0000) == 0))
                {
                    continue;
                }
                if (narrowed[l] != (Float.floatToFloat16(value) & 0xFFFF))
                {
                    fail("narrowing 0x%08x gave 0x%04x, the JDK 0x%04x (seed %d)", bits[l], narrowed[l],
                        Float.floatToFloat16(value) & 0xFFFF, seed);
                }
            }
        }
    }

    private static void assertWidened(final int half, final int widened)
    {
        final float expected = Float.float16ToFloat((short)half);
        if (Float.isNaN(expected))
        {
            // Payload kept and not quieted, as the JDK's Java code does (the hardware conversion may quiet a
            // signalling NaN; the first addition quiets it anyway).
            assertThat(widened).as("fp16 0x%04x", half)
                .isEqualTo((half & 0x8000) << 16 | 0x7F80_0000 | (half & 0x3FF) << 13);
        }
        else
        {
            assertThat(widened).as("fp16 0x%04x", half).isEqualTo(Float.floatToRawIntBits(expected));
        }
    }

    private void checkCase(final ElementType type, final SplittableRandom random)
    {
        final int ranks = random.nextInt(2, 17);
        // Mostly several vector iterations plus a tail; sometimes shorter than one vector.
        final int elements = random.nextInt(4) == 0 ? random.nextInt(1, VECTOR_ELEMENTS) :
            random.nextInt(1, 6) * VECTOR_ELEMENTS + random.nextInt(0, VECTOR_ELEMENTS);
        final int length = elements * 2;
        final int first = 2 * random.nextInt(0, 40);
        final int stride = length + 2 * random.nextInt(0, 40);
        final boolean inPlace = random.nextInt(4) == 0;
        final long result = inPlace ? first : first + (long)ranks * stride;
        final int bytes = (int)(first + (long)(ranks + 1) * stride);
        final short[][] inputs = new short[ranks][elements];
        final int mode = random.nextInt(5);
        for (int e = 0; e < elements; e++)
        {
            final int baseExponent = random.nextInt(type == ElementType.FP16 ? 31 : 255);
            for (int r = 0; r < ranks; r++)
            {
                inputs[r][e] = element(type, random, mode, baseExponent);
            }
        }
        final MemorySegment vector = MemorySegment.ofArray(new byte[bytes]);
        final MemorySegment scalar = MemorySegment.ofArray(new byte[bytes]);
        for (int r = 0; r < ranks; r++)
        {
            for (int e = 0; e < elements; e++)
            {
                vector.set(SHORT_LE, first + (long)r * stride + 2L * e, inputs[r][e]);
                scalar.set(SHORT_LE, first + (long)r * stride + 2L * e, inputs[r][e]);
            }
        }
        SumKernel.sum(type, vector, first, stride, ranks, result, length);
        ScalarSumKernel.sum(type, scalar, first, stride, ranks, result, length);
        for (int e = 0; e < elements; e++)
        {
            final short got = vector.get(SHORT_LE, result + 2L * e);
            final short want = scalar.get(SHORT_LE, result + 2L * e);
            if (isTie(type, inputs, e))
            {
                ties++;
            }
            if (got == want)
            {
                if (isNaN(type, want) && nanIsDetermined(type, inputs, e))
                {
                    strictNans++;
                }
                continue;
            }
            if (isNaN(type, want) && isNaN(type, got) && !nanIsDetermined(type, inputs, e))
            {
                continue;
            }
            final StringBuilder in = new StringBuilder();
            for (int r = 0; r < ranks; r++)
            {
                in.append(String.format(" %04x", inputs[r][e] & 0xFFFF));
            }
            fail("%s W=%d elements=%d element %d: vector 0x%04x, scalar 0x%04x; inputs%s", type, ranks, elements, e,
                got & 0xFFFF, want & 0xFFFF, in);
        }
        // Nothing outside the result may be written (in place, the result overwrites rank 0's data only).
        for (int r = inPlace ? 1 : 0; r < ranks; r++)
        {
            for (int e = 0; e < elements; e++)
            {
                assertThat(vector.get(SHORT_LE, first + (long)r * stride + 2L * e)).isEqualTo(inputs[r][e]);
            }
        }
    }

    /**
     * @param mode 0: any bit pattern; 1: special values; 2: exponents clustered around {@code baseExponent}, so
     *             that sums are exact in fp32 and often fall on a tie; 3: near the largest finite value (overflow);
     *             4: a mix of all.
     */
    private static short element(
        final ElementType type, final SplittableRandom random, final int mode, final int baseExponent)
    {
        final int pick = mode == 4 ? random.nextInt(4) : mode;
        final boolean fp16 = type == ElementType.FP16;
        final int significandBits = fp16 ? 10 : 7;
        final int maxExponent = fp16 ? 30 : 254;
        final int sign = random.nextBoolean() ? 0x8000 : 0;
        switch (pick)
        {
            case 0:
                return (short)random.nextInt(0x1_0000);
            case 1:
            {
                final short[] specials = fp16 ? FP16_SPECIALS : BF16_SPECIALS;
                return specials[random.nextInt(specials.length)];
            }
            case 2:
            {
                final int exponent = Math.max(0, baseExponent - random.nextInt(0, significandBits + 6));
                return (short)(sign | exponent << significandBits | random.nextInt(1 << significandBits));
            }
            default:
            {
                final int exponent = maxExponent - random.nextInt(2);
                return (short)(sign | exponent << significandBits | random.nextInt(1 << significandBits));
            }
        }
    }

    private static boolean isNaN(final ElementType type, final short bits)
    {
        return type == ElementType.FP16 ? (bits & 0x7FFF) > 0x7C00 : (bits & 0x7FFF) > 0x7F80;
    }

    private static boolean isInfinite(final ElementType type, final short bits)
    {
        return (bits & 0x7FFF) == (type == ElementType.FP16 ? 0x7C00 : 0x7F80);
    }

    private static boolean nanIsDetermined(final ElementType type, final short[][] inputs, final int e)
    {
        int nans = 0;
        boolean infinite = false;
        for (final short[] rank : inputs)
        {
            nans += isNaN(type, rank[e]) ? 1 : 0;
            infinite |= isInfinite(type, rank[e]);
        }
        return nans == 0 || (nans == 1 && !infinite);
    }

    /**
     * @return whether the exact rank-order fp32 sum of element {@code e} lies exactly halfway between two
     * neighbours of the narrow type (so the result depends on ties-to-even).
     */
    private static boolean isTie(final ElementType type, final short[][] inputs, final int e)
    {
        float acc = widen(type, inputs[0][e]);
        for (int r = 1; r < inputs.length; r++)
        {
            acc += widen(type, inputs[r][e]);
        }
        if (!Float.isFinite(acc))
        {
            return false;
        }
        final int bits = Float.floatToRawIntBits(acc) & 0x7FFF_FFFF;
        if (type == ElementType.BF16)
        {
            return (bits & 0xFFFF) == 0x8000;
        }
        if (bits >= 0x3880_0000)
        {
            return (bits & 0x1FFF) == 0x1000;
        }
        // fp16 subnormal range: a tie is an odd multiple of 2^-25.
        final double scaled = Math.abs((double)acc) * 0x1p25;
        return scaled == Math.rint(scaled) && ((long)scaled & 1) == 1;
    }

    private static float widen(final ElementType type, final short bits)
    {
        return type == ElementType.FP16 ? Float.float16ToFloat(bits) : SumKernel.bfloat16ToFloat(bits);
    }
}
