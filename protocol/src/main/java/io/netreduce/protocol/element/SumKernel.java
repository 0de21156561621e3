package io.netreduce.protocol.element;

import io.netreduce.protocol.element.ElementType;
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
 * once to nearest-even (bits as {@link Float#floatToFloat16} / {@link #floatToBfloat16} of the fp32 sum): bf16 with
 * the Vector API, fp16 as loops C2 vectorises with the hardware fp16 conversions.
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

    static void sumFloat16(
        final MemorySegment segment, final long first, final long stride, final int ranks, final long result,
        final int length)
    {
        // Rank-outer over an fp32 scratch: each element still sees ((x0 + x1) + x2) + ..., and every loop is a
        // simple counted loop that C2 vectorises with the hardware fp16 conversions (F16C on x86). A Vector API
        // version (no fp16 lanes in JDK 25, so widening and rounding by bit manipulation, as for bf16 below) gave
        // the same bits but measured 4-6x slower, so fp16 stays here.
        final int elements = length >> 1;
        final float[] acc = scratch(elements);
        for (int e = 0; e < elements; e++)
        {
            acc[e] = Float.float16ToFloat(segment.get(SHORT_LE, first + 2L * e));
        }
        for (int r = 1; r < ranks; r++)
        {
            final long base = first + r * stride;
            for (int e = 0; e < elements; e++)
            {
                acc[e] += Float.float16ToFloat(segment.get(SHORT_LE, base + 2L * e));
            }
        }
        for (int e = 0; e < elements; e++)
        {
            segment.set(SHORT_LE, result + 2L * e, Float.floatToFloat16(acc[e]));
        }
    }

    /** fp16 widening scratch: one fp32 accumulator per element of the largest payload. */
    private static final ThreadLocal<float[]> SCRATCH = ThreadLocal.withInitial(() -> new float[4096]);

    private static float[] scratch(final int elements)
    {
        float[] acc = SCRATCH.get();
        if (acc.length < elements)
        {
            acc = new float[elements];
            SCRATCH.set(acc);
        }
        return acc;
    }

    /*
     * bf16 on the Vector API: an int lane holds two adjacent little-endian elements, the even one in its low half
     * and the odd one in its high half; bf16 is the top half of an fp32, so widening is a shift (even) or a mask
     * (odd). Each element keeps its own fp32 accumulator lane and still sees ((x0 + x1) + x2) + ... in rank order;
     * after the last rank both halves are rounded and packed back.
     *
     * The lane operations are written out in the loop on purpose, not in helper methods: C2 always inlines the
     * Vector API's own methods, but a helper of ours may be refused (node-count cutoff in a large caller, or
     * "already compiled into a big method"), and then every vector crossing the call is boxed, 10-100x slower.
     * For the same reason the loop-carried vectors start from values made here, not static constants. Starting
     * from -0.0 lets rank 0 share the loop body: -0.0 + x is x for every x (a NaN becomes quiet, which the next
     * addition does anyway).
     */
    static void sumBfloat16(
        final MemorySegment segment, final long first, final long stride, final int ranks, final long result,
        final int length)
    {
        final int vectorBytes = INTS.vectorByteSize();
        final int upper = length - (length % vectorBytes);
        int i = 0;
        for (; i < upper; i += vectorBytes)
        {
            // Single pass (widening is cheap): even elements shifted up, odd ones masked.
            FloatVector even = FloatVector.broadcast(FLOATS, -0.0f);
            FloatVector odd = FloatVector.broadcast(FLOATS, -0.0f);
            for (int r = 0; r < ranks; r++)
            {
                final IntVector pairs =
                    IntVector.fromMemorySegment(INTS, segment, first + r * stride + i, ByteOrder.LITTLE_ENDIAN);
                even = even.add(pairs.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats());
                odd = odd.add(pairs.and(HIGH_HALF).reinterpretAsFloats());
            }
            // floatToBfloat16 lane-wise: add 0x7FFF plus the lowest kept bit; a NaN is kept and made quiet.
            final IntVector e = even.reinterpretAsInts();
            final IntVector o = odd.reinterpretAsInts();
            final IntVector packed = e.add(0x7FFF).add(e.lanewise(VectorOperators.LSHR, 16).and(1))
                .blend(e.or(0x0040_0000), e.and(0x7FFF_FFFF).compare(VectorOperators.GT, 0x7F80_0000))
                .lanewise(VectorOperators.LSHR, 16)
                .or(o.add(0x7FFF).add(o.lanewise(VectorOperators.LSHR, 16).and(1))
                    .blend(o.or(0x0040_0000), o.and(0x7FFF_FFFF).compare(VectorOperators.GT, 0x7F80_0000))
                    .and(HIGH_HALF));
            packed.intoMemorySegment(segment, result + i, ByteOrder.LITTLE_ENDIAN);
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
     * Run every element type's kernel enough times for the JIT to compile it. Interpreted, the Vector API code
     * costs ~100 us per aggregator; an appliance calls this once at start so that the first aggregations of a job
     * do not pay for compilation. Takes a fraction of a second.
     * <p>
     * The memory is a shared arena's, as the aggregators' is ({@code AnonymousMemory}): C2 compiles the kernels
     * for the kind of segment and session it has seen, and kernels compiled over a confined arena's memory trapped
     * on the aggregators' and were compiled again, about 200 times in all, 2.6-3.0 s of C2's time while the daemon
     * started on the 2-core bed (docs/performance.md, "A fresh daemon's first training: what its JIT does").
     *
     * @param iterations calls per element type (10 000 is past C2's compile threshold).
     */
    public static void warmUp(final int iterations)
    {
        final int length = 4096;
        final int ranks = 4;
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared())
        {
            final MemorySegment segment = arena.allocate((long)length * (ranks + 1), 64);
            for (final ElementType type : ElementType.values())
            {
                for (int i = 0; i < iterations; i++)
                {
                    sum(type, segment, 0, length, ranks, (long)length * ranks, length);
                }
            }
        }
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
