package io.netreduce.dataplane.aggregator;

import io.netreduce.dataplane.ring.ElementType;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Element-wise sum of W rank payloads that lie {@code stride} bytes apart, in rank order: every element is
 * {@code ((x0 + x1) + x2) + ...}, so the result is the same bit pattern whatever order the packets arrived in.
 * Elements are little-endian (RDMA writes host memory as it is).
 * <p>
 * fp32 and int32 use the Vector API (lane-wise IEEE adds, never fused or reassociated across ranks, so
 * vector and scalar give identical bits). fp16 and bf16 are widened to fp32, summed in rank order and rounded
 * once to nearest-even, also with the Vector API: the bits are those of {@link Float#float16ToFloat} /
 * {@link Float#floatToFloat16} and {@link #floatToBfloat16} applied element by element.
 */
public final class SumKernel
{
    private static final VectorSpecies<Float> FLOATS = FloatVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Integer> INTS = IntVector.SPECIES_PREFERRED;
    private static final ValueLayout.OfFloat FLOAT_LE =
        ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt INT_LE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort SHORT_LE =
        ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final int HIGH_HALF = 0xFFFF_0000;
    /** 2^112 = 2^(127 - 15): moves an fp16 exponent to the fp32 bias. */
    private static final float FLOAT16_REBIAS = 0x1p112f;

    private SumKernel()
    {
    }

    /**
     * @param segment memory holding the inputs and the output.
     * @param first   offset of rank 0's data.
     * @param stride  bytes from one rank's data to the next.
     * @param ranks   W.
     * @param result  offset of the output.
     * @param length  bytes of data per rank (a multiple of the element size).
     */
    public static void sum(
        final ElementType type,
        final MemorySegment segment,
        final long first,
        final long stride,
        final int ranks,
        final long result,
        final int length)
    {
        switch (type)
        {
            case FP32 -> sumFloat(segment, first, stride, ranks, result, length);
            case INT32 -> sumInt(segment, first, stride, ranks, result, length);
            case FP16 -> sumFloat16(segment, first, stride, ranks, result, length);
            case BF16 -> sumBfloat16(segment, first, stride, ranks, result, length);
        }
    }

    static void sumFloat(
        final MemorySegment segment, final long first, final long stride, final int ranks, final long result,
        final int length)
    {
        final int vectorBytes = FLOATS.vectorByteSize();
        final int upper = length - (length % vectorBytes);
        int i = 0;
        for (; i < upper; i += vectorBytes)
        {
            FloatVector acc = FloatVector.fromMemorySegment(FLOATS, segment, first + i, ByteOrder.LITTLE_ENDIAN);
            for (int r = 1; r < ranks; r++)
            {
                acc = acc.add(FloatVector.fromMemorySegment(
                    FLOATS, segment, first + r * stride + i, ByteOrder.LITTLE_ENDIAN));
            }
            acc.intoMemorySegment(segment, result + i, ByteOrder.LITTLE_ENDIAN);
        }
        for (; i < length; i += 4)
        {
            float acc = segment.get(FLOAT_LE, first + i);
            for (int r = 1; r < ranks; r++)
            {
                acc += segment.get(FLOAT_LE, first + r * stride + i);
            }
            segment.set(FLOAT_LE, result + i, acc);
        }
    }

    static void sumInt(
        final MemorySegment segment, final long first, final long stride, final int ranks, final long result,
        final int length)
    {
        final int vectorBytes = INTS.vectorByteSize();
        final int upper = length - (length % vectorBytes);
        int i = 0;
        for (; i < upper; i += vectorBytes)
        {
            IntVector acc = IntVector.fromMemorySegment(INTS, segment, first + i, ByteOrder.LITTLE_ENDIAN);
            for (int r = 1; r < ranks; r++)
            {
                acc = acc.add(IntVector.fromMemorySegment(
                    INTS, segment, first + r * stride + i, ByteOrder.LITTLE_ENDIAN));
            }
            acc.intoMemorySegment(segment, result + i, ByteOrder.LITTLE_ENDIAN);
        }
        for (; i < length; i += 4)
        {
            int acc = segment.get(INT_LE, first + i);
            for (int r = 1; r < ranks; r++)
            {
                acc += segment.get(INT_LE, first + r * stride + i);
            }
            segment.set(INT_LE, result + i, acc);
        }
    }

    /*
     * fp16 and bf16: an int lane holds two adjacent little-endian elements, the even one in its low half and the
     * odd one in its high half. Each half is widened to fp32 in its own float vector, so every element keeps its
     * own accumulator and still sees ((x0 + x1) + x2) + ... in rank order; after the last rank both are rounded
     * and packed back into one int lane. Only same-shape lane-wise ops, so no shuffles or shape changes.
     */

    static void sumFloat16(
        final MemorySegment segment, final long first, final long stride, final int ranks, final long result,
        final int length)
    {
        final int vectorBytes = INTS.vectorByteSize();
        final int upper = length - (length % vectorBytes);
        int i = 0;
        for (; i < upper; i += vectorBytes)
        {
            IntVector pairs = IntVector.fromMemorySegment(INTS, segment, first + i, ByteOrder.LITTLE_ENDIAN);
            FloatVector even = widenFloat16(pairs.and(0x7FFF), pairs.lanewise(VectorOperators.LSHL, 16));
            FloatVector odd = widenFloat16(pairs.lanewise(VectorOperators.LSHR, 16).and(0x7FFF), pairs);
            for (int r = 1; r < ranks; r++)
            {
                pairs = IntVector.fromMemorySegment(INTS, segment, first + r * stride + i, ByteOrder.LITTLE_ENDIAN);
                even = even.add(widenFloat16(pairs.and(0x7FFF), pairs.lanewise(VectorOperators.LSHL, 16)));
                odd = odd.add(widenFloat16(pairs.lanewise(VectorOperators.LSHR, 16).and(0x7FFF), pairs));
            }
            narrowToFloat16(even.reinterpretAsInts())
                .or(narrowToFloat16(odd.reinterpretAsInts()).lanewise(VectorOperators.LSHL, 16))
                .intoMemorySegment(segment, result + i, ByteOrder.LITTLE_ENDIAN);
        }
        for (; i < length; i += 2)
        {
            float acc = Float.float16ToFloat(segment.get(SHORT_LE, first + i));
            for (int r = 1; r < ranks; r++)
            {
                acc += Float.float16ToFloat(segment.get(SHORT_LE, first + r * stride + i));
            }
            segment.set(SHORT_LE, result + i, Float.floatToFloat16(acc));
        }
    }

    static void sumBfloat16(
        final MemorySegment segment, final long first, final long stride, final int ranks, final long result,
        final int length)
    {
        final int vectorBytes = INTS.vectorByteSize();
        final int upper = length - (length % vectorBytes);
        int i = 0;
        for (; i < upper; i += vectorBytes)
        {
            // bf16 is the top half of an fp32: widening is a shift (even element) or a mask (odd element).
            IntVector pairs = IntVector.fromMemorySegment(INTS, segment, first + i, ByteOrder.LITTLE_ENDIAN);
            FloatVector even = pairs.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector odd = pairs.and(HIGH_HALF).reinterpretAsFloats();
            for (int r = 1; r < ranks; r++)
            {
                pairs = IntVector.fromMemorySegment(INTS, segment, first + r * stride + i, ByteOrder.LITTLE_ENDIAN);
                even = even.add(pairs.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats());
                odd = odd.add(pairs.and(HIGH_HALF).reinterpretAsFloats());
            }
            roundToBfloat16(even.reinterpretAsInts()).lanewise(VectorOperators.LSHR, 16)
                .or(roundToBfloat16(odd.reinterpretAsInts()).and(HIGH_HALF))
                .intoMemorySegment(segment, result + i, ByteOrder.LITTLE_ENDIAN);
        }
        for (; i < length; i += 2)
        {
            float acc = bfloat16ToFloat(segment.get(SHORT_LE, first + i));
            for (int r = 1; r < ranks; r++)
            {
                acc += bfloat16ToFloat(segment.get(SHORT_LE, first + r * stride + i));
            }
            segment.set(SHORT_LE, result + i, floatToBfloat16(acc));
        }
    }

    /**
     * Exact fp16 to fp32, as {@link Float#float16ToFloat}: NaN payloads are kept, not quieted.
     *
     * @param magnitude the fp16 bits without the sign (0 to 0x7FFF) in each lane.
     * @param signBit   lanes whose bit 31 is the fp16 sign bit (the rest is ignored).
     */
    static FloatVector widenFloat16(final IntVector magnitude, final IntVector signBit)
    {
        // Exponent and significand shifted into place read as an fp32 2^112 too small, subnormals included
        // (they become fp32 subnormals, normalised by the exact multiply); Inf and NaN take the maximum exponent.
        final IntVector shifted = magnitude.lanewise(VectorOperators.LSHL, 13);
        final IntVector finite = shifted.reinterpretAsFloats().mul(FLOAT16_REBIAS).reinterpretAsInts();
        return finite.blend(shifted.or(0x7F80_0000), magnitude.compare(VectorOperators.GE, 0x7C00))
            .or(signBit.and(0x8000_0000))
            .reinterpretAsFloats();
    }

    /**
     * fp32 to fp16 as {@link Float#floatToFloat16}: nearest-even, overflow to infinity, NaN keeps its sign and
     * top significand bits (the lower ones ORed in so that it stays a NaN).
     *
     * @return the fp16 bits in the low half of each lane, the high half zero.
     */
    static IntVector narrowToFloat16(final IntVector bits)
    {
        final IntVector abs = bits.and(0x7FFF_FFFF);
        // Normal results: rebias the exponent and round the 13 dropped bits to nearest-even by integer addition
        // (a carry into the exponent is the correct result).
        final IntVector normal = abs.add(0x0FFF).add(abs.lanewise(VectorOperators.LSHR, 13).and(1))
            .sub(0x3800_0000).lanewise(VectorOperators.LSHR, 13);
        // Subnormal results (below 2^-14): adding 0.5 makes the float adder round to a multiple of 2^-24, the
        // fp16 subnormal step; what it added beyond 0.5 is the fp16 significand (0x400 if it rounded up to 2^-14).
        final IntVector subnormal = abs.reinterpretAsFloats().add(0.5f).reinterpretAsInts().sub(0x3F00_0000);
        final IntVector nan = abs.and(0x007F_E000).lanewise(VectorOperators.LSHR, 13)
            .or(abs.and(0x0000_1FF0).lanewise(VectorOperators.LSHR, 4))
            .or(abs.and(0x0000_000F))
            .or(0x7C00);
        return normal
            .blend(subnormal, abs.compare(VectorOperators.LT, 0x3880_0000))
            .blend(0x7C00, abs.compare(VectorOperators.GE, 0x477F_F000))
            .blend(nan, abs.compare(VectorOperators.GT, 0x7F80_0000))
            .or(bits.lanewise(VectorOperators.LSHR, 16).and(0x8000));
    }

    /**
     * {@link #floatToBfloat16} on every lane.
     *
     * @return the bf16 bits in the high half of each lane (the low half is garbage).
     */
    static IntVector roundToBfloat16(final IntVector bits)
    {
        final IntVector rounded = bits.add(0x7FFF).add(bits.lanewise(VectorOperators.LSHR, 16).and(1));
        return rounded.blend(bits.or(0x0040_0000),
            bits.and(0x7FFF_FFFF).compare(VectorOperators.GT, 0x7F80_0000));
    }

    /**
     * @return the fp32 value of bf16 {@code bits} (exact: bf16 is the top half of an fp32).
     */
    public static float bfloat16ToFloat(final short bits)
    {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    /**
     * @return the bf16 nearest to {@code value}, ties to even; NaN stays a (quiet) NaN.
     */
    public static short floatToBfloat16(final float value)
    {
        // Branch-free so that the summation loop vectorises: NaN lanes keep their sign and payload top bits and
        // become quiet; every other value is rounded by adding 0x7FFF plus the lowest kept bit.
        final int bits = Float.floatToRawIntBits(value);
        final int rounded = bits + 0x7FFF + ((bits >>> 16) & 1);
        final int nanMask = (0x7F80_0000 - (bits & 0x7FFF_FFFF)) >> 31;
        return (short)(((rounded & ~nanMask) | ((bits | 0x0040_0000) & nanMask)) >>> 16);
    }
}
