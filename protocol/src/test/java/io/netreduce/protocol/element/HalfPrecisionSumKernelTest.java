package io.netreduce.protocol.element;

import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.testing.SeededCases;
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
 * The fp16 and bf16 kernels (bf16 on the Vector API) against the scalar kernel ({@link ScalarSumKernel}), bit for
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
    void shouldMatchOnEveryElementValuePlusEachOfManyAddends()
    {
        // Rank 0 holds all 65536 bit patterns, rank 1 one addend for all of them: -0.0 (the sum is the element
        // itself, so widening and rounding must give it back), the specials, and random values; with W = 3 a third
        // rank adds a random value per element. Covers every input of the widening and a wide spread of sums.
        final long seed = SeededCases.baseSeed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (final ElementType type : new ElementType[] { ElementType.FP16, ElementType.BF16 })
        {
            final short[] specials = type == ElementType.FP16 ? FP16_SPECIALS : BF16_SPECIALS;
            final int addends = 1 + specials.length + 24;
            for (int a = 0; a < addends; a++)
            {
                final short addend = a == 0 ? (short)0x8000 :
                    a <= specials.length ? specials[a - 1] : (short)random.nextInt(0x1_0000);
                final int ranks = a % 2 == 0 ? 2 : 3;
                final short[][] inputs = new short[ranks][0x1_0000];
                for (int e = 0; e < 0x1_0000; e++)
                {
                    inputs[0][e] = (short)e;
                    inputs[1][e] = addend;
                    if (ranks == 3)
                    {
                        inputs[2][e] = (short)random.nextInt(0x1_0000);
                    }
                }
                compare(type, inputs, 0, 2 * 0x1_0000, false, "addend " + a + " (seed " + seed + ")");
            }
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
        compare(type, inputs, first, stride, inPlace, "W=" + ranks + " elements=" + elements);
    }

    /**
     * Sum {@code inputs} (one row per rank) with both kernels, rank r's data at {@code first + r * stride} and
     * the result after the last rank or, {@code inPlace}, over rank 0's data; compare element by element.
     */
    private void compare(
        final ElementType type, final short[][] inputs, final int first, final int stride, final boolean inPlace,
        final String what)
    {
        final int ranks = inputs.length;
        final int elements = inputs[0].length;
        final int length = elements * 2;
        final long result = inPlace ? first : first + (long)ranks * stride;
        final int bytes = (int)(first + (long)(ranks + 1) * stride);
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
            fail("%s %s element %d: vector 0x%04x, scalar 0x%04x; inputs%s", type, what, e, got & 0xFFFF,
                want & 0xFFFF, in);
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
