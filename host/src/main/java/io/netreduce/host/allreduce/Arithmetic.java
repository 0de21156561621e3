package io.netreduce.host.allreduce;

import io.netreduce.protocol.element.SumKernel;
import io.netreduce.protocol.element.ElementType;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.LITTLE_ENDIAN;

/**
 * The element arithmetic both all-reduce algorithms and their checks use, over raw element bits (fp32 bits,
 * fp16/bf16 in the low 16 bits, int32 as is).
 * <ul>
 *   <li>{@link #rankOrderSum}: what the appliance computes: ((x0 + x1) + x2) + ... in fp32 (int32 wraps), fp16
 *       and bf16 widened to fp32 and rounded to nearest-even once at the end.</li>
 *   <li>{@link #add}: one ring step: widen both operands to fp32, add, round back to the element type. The ring
 *       rounds after every step and adds in ring order starting at the chunk's owner, so for floats its result
 *       is generally not bit-identical to the rank-order sum; {@link #ringOrderSum} reproduces it exactly.</li>
 * </ul>
 */
public final class Arithmetic
{
    private Arithmetic()
    {
    }

    /**
     * Raw element values of the inputs: {@code bits(rank, index)}.
     */
    @FunctionalInterface
    public interface Inputs
    {
        int bits(int rank, int index);
    }

    public static float toFloat(final ElementType type, final int bits)
    {
        return switch (type)
        {
            case FP32 -> Float.intBitsToFloat(bits);
            case FP16 -> Float.float16ToFloat((short)bits);
            case BF16 -> Float.intBitsToFloat((bits & 0xFFFF) << 16);
            case INT32 -> bits;
        };
    }

    /**
     * Round an fp32 value to the element type's bits (nearest-even).
     */
    public static int fromFloat(final ElementType type, final float value)
    {
        return switch (type)
        {
            case FP32 -> Float.floatToRawIntBits(value);
            case FP16 -> Float.floatToFloat16(value) & 0xFFFF;
            case BF16 -> SumKernel.floatToBfloat16(value) & 0xFFFF; // the appliance's own rounding
            case INT32 -> (int)value;
        };
    }

    /**
     * One ring step on two elements: int32 wraps; floats add in fp32 and round to the type.
     */
    public static int add(final ElementType type, final int a, final int b)
    {
        return switch (type)
        {
            case INT32 -> a + b;
            case FP32 -> Float.floatToRawIntBits(Float.intBitsToFloat(a) + Float.intBitsToFloat(b));
            default -> fromFloat(type, toFloat(type, a) + toFloat(type, b));
        };
    }

    /**
     * {@code dst[i] = add(dst[i], src[i])} over {@code bytes} bytes (a multiple of the element size).
     */
    public static void addInto(
        final ElementType type,
        final MutableDirectBuffer dst,
        final int dstOffset,
        final DirectBuffer src,
        final int srcOffset,
        final int bytes)
    {
        switch (type)
        {
            case INT32 ->
            {
                for (int i = 0; i < bytes; i += 4)
                {
                    dst.putInt(dstOffset + i, dst.getInt(dstOffset + i, LITTLE_ENDIAN) +
                        src.getInt(srcOffset + i, LITTLE_ENDIAN), LITTLE_ENDIAN);
                }
            }
            case FP32 ->
            {
                for (int i = 0; i < bytes; i += 4)
                {
                    dst.putFloat(dstOffset + i, dst.getFloat(dstOffset + i, LITTLE_ENDIAN) +
                        src.getFloat(srcOffset + i, LITTLE_ENDIAN), LITTLE_ENDIAN);
                }
            }
            default ->
            {
                for (int i = 0; i < bytes; i += 2)
                {
                    final int a = dst.getShort(dstOffset + i, LITTLE_ENDIAN);
                    final int b = src.getShort(srcOffset + i, LITTLE_ENDIAN);
                    dst.putShort(dstOffset + i, (short)add(type, a, b), LITTLE_ENDIAN);
                }
            }
        }
    }

    /**
     * The appliance's sum of element {@code index} over {@code world} ranks, in rank order.
     */
    public static int rankOrderSum(final ElementType type, final int world, final Inputs inputs, final int index)
    {
        if (type == ElementType.INT32)
        {
            int acc = 0;
            for (int r = 0; r < world; r++)
            {
                acc += inputs.bits(r, index);
            }
            return acc;
        }
        float acc = toFloat(type, inputs.bits(0, index));
        for (int r = 1; r < world; r++)
        {
            acc += toFloat(type, inputs.bits(r, index));
        }
        return fromFloat(type, acc);
    }

    /**
     * A multi-rack ring's sum of element {@code index} (architecture.md, "Summation order"): each rack's leaf sums
     * its ranks in rank order and rounds to the element type (that partial is what goes up), then the spine sums
     * the partials in rack order and rounds once. Racks hold consecutive ranks; rack k is
     * {@code rackFirst[k] .. rackFirst[k + 1] - 1}, the last rack ending at {@code world - 1}. For int32 this is
     * the rank-order sum (wrapping addition is associative).
     */
    public static int hierarchicalSum(
        final ElementType type, final int world, final int[] rackFirst, final Inputs inputs, final int index)
    {
        final int racks = rackFirst.length;
        final int[] partials = new int[racks];
        for (int k = 0; k < racks; k++)
        {
            final int first = rackFirst[k];
            final int end = k + 1 < racks ? rackFirst[k + 1] : world;
            partials[k] = rankOrderSum(type, end - first, (r, i) -> inputs.bits(first + r, i), index);
        }
        return racks == 1 ? partials[0] : rankOrderSum(type, racks, (k, i) -> partials[k], index);
    }

    /**
     * The ring all-reduce's sum of element {@code index}: the chunk holding it ({@code index / chunkElements}) is
     * reduced starting at the rank of the same number and then by each successor, rounding after every step.
     */
    public static int ringOrderSum(
        final ElementType type, final int world, final int chunkElements, final Inputs inputs, final int index)
    {
        final int owner = index / chunkElements;
        int acc = inputs.bits(owner, index);
        for (int i = 1; i < world; i++)
        {
            acc = add(type, acc, inputs.bits((owner + i) % world, index));
        }
        return acc;
    }

    /**
     * @return the bits of element {@code index} of a tensor.
     */
    public static int get(final Tensor tensor, final int index)
    {
        final int at = tensor.offset() + index * tensor.type().size();
        return tensor.type().size() == 4 ? tensor.buffer().getInt(at, LITTLE_ENDIAN) :
            tensor.buffer().getShort(at, LITTLE_ENDIAN) & 0xFFFF;
    }

    public static void put(final Tensor tensor, final int index, final int bits)
    {
        final int at = tensor.offset() + index * tensor.type().size();
        if (tensor.type().size() == 4)
        {
            tensor.buffer().putInt(at, bits, LITTLE_ENDIAN);
        }
        else
        {
            tensor.buffer().putShort(at, (short)bits, LITTLE_ENDIAN);
        }
    }
}
