package io.netreduce.protocol.element;

import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.protocol.testing.SeededCases;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

class SumKernelTest
{
    @Test
    void shouldEqualTheScalarRankOrderReference()
    {
        SeededCases.run("sum kernel vs reference", 100, (random, index) -> checkAgainstReference(
            ElementType.values()[index % 4], random.nextInt(2, 17), random.nextInt(1, 301), random.nextLong()));
    }

    private static void checkAgainstReference(
        final ElementType type, final int ranks, final int elements, final long seed)
    {
        final int length = elements * type.size();
        final int stride = (length + 63) & ~63;
        final Random random = new Random(seed);
        final byte[][] inputs = new byte[ranks][];
        final MemorySegment segment = MemorySegment.ofArray(new byte[stride * (ranks + 1)]);
        for (int r = 0; r < ranks; r++)
        {
            inputs[r] = Gradients.random(type, length, random);
            MemorySegment.copy(MemorySegment.ofArray(inputs[r]), 0, segment, (long)r * stride, length);
        }
        SumKernel.sum(type, segment, 0, stride, ranks, (long)ranks * stride, length);
        final byte[] result = segment.asSlice((long)ranks * stride, length).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        assertThat(result).isEqualTo(Gradients.referenceSum(type, inputs));
    }

    @Test
    void shouldRoundBfloat16ToNearestEven()
    {
        assertThat(SumKernel.floatToBfloat16(Float.intBitsToFloat(0x3F80_8000))).isEqualTo((short)0x3F80);
        assertThat(SumKernel.floatToBfloat16(Float.intBitsToFloat(0x3F81_8000))).isEqualTo((short)0x3F82);
        assertThat(SumKernel.floatToBfloat16(Float.intBitsToFloat(0x3F80_8001))).isEqualTo((short)0x3F81);
        assertThat(Float.isNaN(SumKernel.bfloat16ToFloat(SumKernel.floatToBfloat16(Float.NaN)))).isTrue();
        assertThat(SumKernel.floatToBfloat16(Float.POSITIVE_INFINITY)).isEqualTo((short)0x7F80);
    }
}
