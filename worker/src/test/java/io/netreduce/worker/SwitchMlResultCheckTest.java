package io.netreduce.worker;

import io.netreduce.host.allreduce.TensorPattern;
import io.netreduce.host.switchml.ExponentQuantizer;
import io.netreduce.protocol.element.ElementType;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteOrder;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The CLI's check of SwitchML results: int32 against the wrapping sum of every rank's pattern, fp32 against the exact
 * sum within the block fixed point's bound, with W workers' quantization done here as the workers and the switch do it.
 */
class SwitchMlResultCheckTest
{
    private static final long SEED = 42;
    private static final int WORLD = 4;
    private static final int K = 256;

    @Test
    void shouldPassTheWrappingInt32SumAndNameTheFirstElementThatIsNot()
    {
        final int n = 3 * K + 5;
        final int[] sum = new int[n];
        for (int r = 0; r < WORLD; r++)
        {
            for (int i = 0; i < n; i++)
            {
                sum[i] += TensorPattern.bits(ElementType.INT32, SEED, r, 2, i);
            }
        }
        final ResultCheck check = new ResultCheck(ElementType.INT32, SEED, WORLD);
        assertThat(check.checkSwitchMl(sum, 2)).isNull();

        sum[700]++;
        assertThat(check.checkSwitchMl(sum, 2)).startsWith("element 700: expected ");
        assertThat(check.checkSwitchMl(sum, 3)).startsWith("element 0: ");
    }

    @Test
    void shouldPassBlockFixedPointFp32SumsAndNameTheFirstElementOutsideTheBound()
    {
        final int n = 3 * K + 5;
        final float[] result = switchMlSum(n, 1);
        final ResultCheck check = new ResultCheck(ElementType.FP32, SEED, WORLD);
        assertThat(check.checkSwitchMl(result, K, 1)).isNull();

        // Far more than the bound allows at these magnitudes (sums of 4 values in [-1, 1): about 2.4e-7).
        result[600] += 1e-3f;
        assertThat(check.checkSwitchMl(result, K, 1)).startsWith("element 600: exact sum ")
            .contains("above the bound");
        // Another call's result.
        assertThat(check.checkSwitchMl(switchMlSum(n, 1), K, 2)).startsWith("element 0: exact sum ");
    }

    /**
     * @return what every worker holds after a SwitchML fp32 call on the ranks' patterns of {@code iteration}.
     */
    private static float[] switchMlSum(final int n, final int iteration)
    {
        final ExponentQuantizer quantizer = new ExponentQuantizer(WORLD);
        final float[][] inputs = new float[WORLD][n];
        for (int r = 0; r < WORLD; r++)
        {
            for (int i = 0; i < n; i++)
            {
                inputs[r][i] = Float.intBitsToFloat(TensorPattern.bits(ElementType.FP32, SEED, r, iteration, i));
            }
        }
        final float[] result = new float[n];
        final UnsafeBuffer packet = new UnsafeBuffer(new byte[K * Integer.BYTES]);
        for (int from = 0; from < n; from += K)
        {
            final int count = Math.min(K, n - from);
            int exponent = ExponentQuantizer.MIN_EXPONENT;
            for (final float[] input : inputs)
            {
                exponent = Math.max(exponent, ExponentQuantizer.exponent(input, from, count));
            }
            final int[] sum = new int[count];
            for (final float[] input : inputs)
            {
                quantizer.quantize(input, from, count, exponent, packet, 0);
                for (int i = 0; i < count; i++)
                {
                    sum[i] += packet.getInt(i * Integer.BYTES, ByteOrder.BIG_ENDIAN);
                }
            }
            for (int i = 0; i < count; i++)
            {
                packet.putInt(i * Integer.BYTES, sum[i], ByteOrder.BIG_ENDIAN);
            }
            quantizer.dequantize(packet, 0, count, exponent, result, from);
        }
        return result;
    }
}
