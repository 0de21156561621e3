package io.netreduce.host.switchml;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.math.BigDecimal;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

/**
 * SwitchML's block fixed point on its own: the exponent the client would choose, the scale, the overflow margin, the
 * all-zero block, and the error bound against exact sums, W workers simulated with the switch's wrapping int32 sum.
 */
class ExponentQuantizerTest
{
    @ParameterizedTest(name = "{0} -> {1}")
    @CsvSource({
        "1.0, 1", "0.75, 0", "1.5, 1", "-3.0, 2", "4.0, 3", "0x1.fffffep1, 2",
        "0x1.0p-126, -125", "0x1.0p-127, -126", "1.4E-45, -126", "0.0, -126", "-0.0, -126",
        "0x1.fffffep126, 127", "1e30, 100", "-1e-30, -99" })
    void shouldChooseTheExponentJustAboveTheLargestMagnitudeAsTheClientDoes(final float value, final int exponent)
    {
        final float[] block = { 0.25f, value, -0.125f };
        final int expected = Math.max(exponent, -1); // 0.25 alone has exponent -1
        assertThat(ExponentQuantizer.exponent(block, 0, 3)).isEqualTo(expected);
        assertThat(ExponentQuantizer.exponent(block, 1, 1)).isEqualTo(exponent);
        // Every magnitude of the block is strictly below 2^e.
        assertThat((double)Math.abs(value)).isLessThan(Math.scalb(1.0, exponent));
        // The client: ((bits & 0x7f800000) >> 23) - 126 of the largest magnitude.
        assertThat(((Float.floatToRawIntBits(Math.abs(value)) & 0x7f80_0000) >> 23) - 126).isEqualTo(exponent);
    }

    @Test
    void shouldGiveBlocksOfZerosAndDenormalsTheSmallestExponent()
    {
        assertThat(ExponentQuantizer.exponent(new float[64], 0, 64)).isEqualTo(ExponentQuantizer.MIN_EXPONENT);
        assertThat(ExponentQuantizer.exponent(new float[0], 0, 0)).isEqualTo(ExponentQuantizer.MIN_EXPONENT);
        assertThat(ExponentQuantizer.exponent(new float[] { Float.MIN_VALUE, -0x1.fffffcp-127f }, 0, 2))
            .isEqualTo(ExponentQuantizer.MIN_EXPONENT);
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(floats = { Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, 0x1.0p127f,
        -Float.MAX_VALUE })
    void shouldRefuseValuesWithoutAnInt8Exponent(final float value)
    {
        final float[] block = { 1.0f, value };
        assertThatThrownBy(() -> ExponentQuantizer.exponent(block, 0, 2))
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessage("element 1 is " + value + ": SwitchML's block fixed point carries only finite floats of " +
                "magnitude below 2^127 (about 1.7e38)");
        assertThatThrownBy(() -> ExponentQuantizer.requireQuantizable(block, 0, 2))
            .isInstanceOf(IllegalArgumentException.class);
        ExponentQuantizer.requireQuantizable(block, 0, 1);
    }

    @Test
    void shouldScaleByInt32MaxOverWTimesTwoToTheExponent()
    {
        final ExponentQuantizer quantizer = new ExponentQuantizer(8);
        assertThat(quantizer.scale(0)).isEqualTo(Integer.MAX_VALUE / 8.0);
        assertThat(quantizer.scale(3)).isEqualTo(Integer.MAX_VALUE / 64.0);
        assertThat(quantizer.scale(-126)).isEqualTo(Integer.MAX_VALUE / 8.0 * 0x1.0p126);
        assertThat(quantizer.scale(127)).isEqualTo(Integer.MAX_VALUE / 8.0 * 0x1.0p-127);
        for (int e = ExponentQuantizer.MIN_EXPONENT; e <= ExponentQuantizer.MAX_EXPONENT; e++)
        {
            assertThat(quantizer.scale(e) * quantizer.unit(e)).as("e = " + e).isCloseTo(1.0,
                offset(1e-15));
        }
    }

    @ParameterizedTest(name = "W = {0}")
    @ValueSource(ints = { 1, 2, 3, 7, 8, 63, 64 })
    void shouldNeverLetWWorkersLargestValuesOverflowTheSwitchsInt32Sum(final int workers)
    {
        final ExponentQuantizer quantizer = new ExponentQuantizer(workers);
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[8]);
        for (final int e : new int[] { ExponentQuantizer.MIN_EXPONENT, -40, 0, 1, 50, ExponentQuantizer.MAX_EXPONENT })
        {
            // The largest float below 2^e (for e = -126 the largest denormal), both signs.
            final float largest = Math.nextDown((float)Math.scalb(1.0, e));
            quantizer.quantize(new float[] { largest, -largest }, 0, 2, e, buffer, 0);
            final long q = buffer.getInt(0, ByteOrder.BIG_ENDIAN);
            assertThat(q).as("e = " + e).isPositive().isEqualTo(-buffer.getInt(4, ByteOrder.BIG_ENDIAN));
            assertThat(q * workers).as("W of them, e = " + e).isLessThanOrEqualTo(Integer.MAX_VALUE);
        }
    }

    @Test
    void shouldRefuseToQuantizeABlockWithAnExponentBelowItsOwn()
    {
        final ExponentQuantizer quantizer = new ExponentQuantizer(4);
        final float[] block = { 1.0f, -4.0f };
        assertThatThrownBy(() -> quantizer.quantize(block, 0, 2, 2, new UnsafeBuffer(new byte[8]), 0))
            .isInstanceOf(IllegalStateException.class)
            .hasMessageContaining("element 1 (-4.0) is not below 2^2");
        quantizer.quantize(block, 0, 2, 3, new UnsafeBuffer(new byte[8]), 0);
    }

    @Test
    void shouldQuantizeAndDequantizeAnAllZeroBlockToZeros()
    {
        final ExponentQuantizer quantizer = new ExponentQuantizer(4);
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[4 * 16]);
        buffer.setMemory(0, buffer.capacity(), (byte)0x55);
        final float[] zeros = new float[16];
        zeros[3] = -0.0f;
        quantizer.quantize(zeros, 0, 16, ExponentQuantizer.exponent(zeros, 0, 16), buffer, 0);
        for (int i = 0; i < 16; i++)
        {
            assertThat(buffer.getInt(4 * i)).isZero();
        }
        final float[] out = new float[16];
        Arrays.fill(out, 1.0f);
        quantizer.dequantize(buffer, 0, 16, ExponentQuantizer.MIN_EXPONENT, out, 0);
        assertThat(out).containsOnly(0.0f);
    }

    @ParameterizedTest(name = "W = {0}")
    @ValueSource(ints = { 1, 2, 4, 8, 64 })
    void shouldKeepEverySumWithinTheBoundOfTheExactSum(final int workers)
    {
        final ExponentQuantizer quantizer = new ExponentQuantizer(workers);
        final SplittableRandom random = new SplittableRandom(workers);
        final int k = 64;
        final UnsafeBuffer packet = new UnsafeBuffer(new byte[k * 4]);
        double worstShare = 0;
        for (int trial = 0; trial < 400; trial++)
        {
            // Every kind of block in turn: Fp32Inputs chooses the kind by the block's index.
            final int kind = trial % 8;
            final float[][] blocks = Fp32Inputs.tensors(workers, (kind + 1) * k, k, trial);
            final float[][] inputs = new float[workers][];
            for (int w = 0; w < workers; w++)
            {
                inputs[w] = Arrays.copyOfRange(blocks[w], kind * k, (kind + 1) * k);
            }
            int exponent = Integer.MIN_VALUE;
            for (final float[] input : inputs)
            {
                exponent = Math.max(exponent, ExponentQuantizer.exponent(input, 0, k));
            }
            // The switch: W contributions added in int32 (an overflow would show as a wrong sum below).
            final int[] sum = new int[k];
            for (final float[] input : inputs)
            {
                quantizer.quantize(input, 0, k, exponent, packet, 0);
                for (int i = 0; i < k; i++)
                {
                    sum[i] += packet.getInt(4 * i, ByteOrder.BIG_ENDIAN);
                }
            }
            for (int i = 0; i < k; i++)
            {
                packet.putInt(4 * i, sum[i], ByteOrder.BIG_ENDIAN);
            }
            final float[] result = new float[k];
            quantizer.dequantize(packet, 0, k, exponent, result, 0);
            for (int i = 0; i < k; i++)
            {
                final BigDecimal exact = Fp32Inputs.exactSum(inputs, i);
                final double bound = quantizer.errorBound(exponent, exact.doubleValue());
                final double error = new BigDecimal(result[i]).subtract(exact).abs().doubleValue();
                assertThat(error).as("trial %d element %d: exact %s, result %s, e = %d", trial, i, exact, result[i],
                    exponent).isLessThanOrEqualTo(bound);
                worstShare = Math.max(worstShare, error / bound);
            }
        }
        // Not a vacuous bound: some element comes within a factor of 4 of it.
        assertThat(worstShare).isGreaterThan(0.25);
    }

    @Test
    void shouldStateTheBoundAsTheQuantizationTermPlusTheFloatRounding()
    {
        final ExponentQuantizer quantizer = new ExponentQuantizer(4);
        final double quantization = 16 * 0.5 / Integer.MAX_VALUE; // W^2 2^(e-1) / (2^31 - 1) at e = 0
        assertThat(quantizer.errorBound(0, 0.0)).isCloseTo(quantization * (1 + 0x1.0p-18) + 0x1.0p-150,
            offset(1e-24));
        assertThat(quantizer.errorBound(0, -2.0) - quantizer.errorBound(0, 0.0)).isCloseTo(0x1.0p-23, offset(1e-20));
        assertThat(quantizer.errorBound(10, 0.0)).isCloseTo(quantizer.errorBound(0, 0.0) * 1024,
            offset(1e-12));
    }

    @Test
    void shouldRefuseMoreWorkersThanOneScaleServes()
    {
        assertThatThrownBy(() -> new ExponentQuantizer(65)).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("1..64 workers: 65");
        assertThatThrownBy(() -> new ExponentQuantizer(0)).isInstanceOf(IllegalArgumentException.class);
    }
}
