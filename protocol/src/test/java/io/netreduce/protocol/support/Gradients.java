package io.netreduce.protocol.support;

import io.netreduce.protocol.element.SumKernel;
import io.netreduce.protocol.element.ElementType;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;

/**
 * Random gradient data and an independent reference sum for tests: scalar, rank order, written from the
 * definition (widen, add in fp32 rank by rank, round once) rather than by calling the kernel under test.
 */
public final class Gradients
{
    private Gradients()
    {
    }

    public static byte[] random(final ElementType type, final int bytes, final Random random)
    {
        final ByteBuffer out = ByteBuffer.allocate(bytes).order(ByteOrder.LITTLE_ENDIAN);
        while (out.hasRemaining())
        {
            final float value = (float)((random.nextDouble() - 0.5) * Math.pow(2, random.nextInt(20) - 8));
            switch (type)
            {
                case FP32 -> out.putFloat(value);
                case INT32 -> out.putInt(random.nextInt());
                case FP16 -> out.putShort(Float.floatToFloat16(value));
                case BF16 -> out.putShort((short)(Float.floatToRawIntBits(value) >>> 16));
            }
        }
        return out.array();
    }

    /**
     * @return the element-wise sum of {@code inputs} (one per rank) in rank order.
     */
    public static byte[] referenceSum(final ElementType type, final byte[][] inputs)
    {
        final int bytes = inputs[0].length;
        final ByteBuffer out = ByteBuffer.allocate(bytes).order(ByteOrder.LITTLE_ENDIAN);
        final ByteBuffer[] in = new ByteBuffer[inputs.length];
        for (int r = 0; r < inputs.length; r++)
        {
            in[r] = ByteBuffer.wrap(inputs[r]).order(ByteOrder.LITTLE_ENDIAN);
        }
        for (int i = 0; i < bytes; i += type.size())
        {
            switch (type)
            {
                case FP32 ->
                {
                    float acc = in[0].getFloat(i);
                    for (int r = 1; r < inputs.length; r++)
                    {
                        acc = acc + in[r].getFloat(i);
                    }
                    out.putFloat(i, acc);
                }
                case INT32 ->
                {
                    int acc = 0;
                    for (final ByteBuffer b : in)
                    {
                        acc += b.getInt(i);
                    }
                    out.putInt(i, acc);
                }
                case FP16 ->
                {
                    float acc = Float.float16ToFloat(in[0].getShort(i));
                    for (int r = 1; r < inputs.length; r++)
                    {
                        acc = acc + Float.float16ToFloat(in[r].getShort(i));
                    }
                    out.putShort(i, Float.floatToFloat16(acc));
                }
                case BF16 ->
                {
                    float acc = Float.intBitsToFloat((in[0].getShort(i) & 0xFFFF) << 16);
                    for (int r = 1; r < inputs.length; r++)
                    {
                        acc = acc + Float.intBitsToFloat((in[r].getShort(i) & 0xFFFF) << 16);
                    }
                    out.putShort(i, roundToBfloat16(acc));
                }
            }
        }
        return out.array();
    }

    /**
     * Round to nearest, ties to even, by looking at the discarded half directly.
     */
    static short roundToBfloat16(final float value)
    {
        if (Float.isNaN(value))
        {
            return SumKernel.floatToBfloat16(value);
        }
        final int bits = Float.floatToRawIntBits(value);
        int upper = bits >>> 16;
        final int lower = bits & 0xFFFF;
        if (lower > 0x8000 || (lower == 0x8000 && (upper & 1) == 1))
        {
            upper++;
        }
        return (short)upper;
    }
}
