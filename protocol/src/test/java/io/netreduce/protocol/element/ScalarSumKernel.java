package io.netreduce.protocol.element;

import io.netreduce.protocol.element.ElementType;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The scalar summation {@link SumKernel} used for fp16 and bf16 before bf16 moved to the Vector API (rank-outer
 * over an fp32 scratch, the JDK's fp16 conversions and {@link SumKernel#floatToBfloat16}), frozen here as the
 * reference the kernel must match bit for bit and as the "before" in {@code SumKernelBenchmark}. fp32 and int32
 * are the plain scalar rank-order loops. Same arguments as {@link SumKernel#sum}.
 */
public final class ScalarSumKernel
{
    private static final ValueLayout.OfFloat FLOAT_LE =
        ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt INT_LE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort SHORT_LE =
        ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Widening scratch: one fp32 accumulator per element of the largest payload. */
    private static final ThreadLocal<float[]> SCRATCH = ThreadLocal.withInitial(() -> new float[4096]);

    private ScalarSumKernel()
    {
    }

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
        for (int i = 0; i < length; i += 4)
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
        for (int i = 0; i < length; i += 4)
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
        // Rank-outer over an fp32 accumulator: each element still sees ((x0 + x1) + x2) + ...
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

    static void sumBfloat16(
        final MemorySegment segment, final long first, final long stride, final int ranks, final long result,
        final int length)
    {
        final int elements = length >> 1;
        final float[] acc = scratch(elements);
        for (int e = 0; e < elements; e++)
        {
            acc[e] = Float.intBitsToFloat((segment.get(SHORT_LE, first + 2L * e) & 0xFFFF) << 16);
        }
        for (int r = 1; r < ranks; r++)
        {
            final long base = first + r * stride;
            for (int e = 0; e < elements; e++)
            {
                acc[e] += Float.intBitsToFloat((segment.get(SHORT_LE, base + 2L * e) & 0xFFFF) << 16);
            }
        }
        for (int e = 0; e < elements; e++)
        {
            segment.set(SHORT_LE, result + 2L * e, SumKernel.floatToBfloat16(acc[e]));
        }
    }

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
}
