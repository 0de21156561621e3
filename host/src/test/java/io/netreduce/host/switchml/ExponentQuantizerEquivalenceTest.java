package io.netreduce.host.switchml;

import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The Vector API {@link ExponentQuantizer} against {@link ScalarExponentQuantizer}, the element-by-element version it
 * replaced: the same exponents, the same bytes on the wire, the same float bits back, and the same exceptions (type,
 * message, and the elements written before the one refused) on random blocks of every kind: uniform, zeros of both
 * signs, subnormals, the smallest normals, powers of two, values just below 2<sup>127</sup>, any finite bits, mixed
 * magnitudes, negative, NaN and infinities; every block length from 1 to 2048 (lane multiples and not), unaligned
 * array and buffer offsets, heap and off-heap buffers, every W the switch serves, exponents from the block's own up,
 * below it (refused) and int32 sums over the whole range. Enough blocks that the JIT compiles the vector loops.
 */
class ExponentQuantizerEquivalenceTest
{
    private static final int MAX_BLOCK = 2048;
    private static final int SLACK = 8;

    @ParameterizedTest(name = "W = {0}")
    @ValueSource(ints = { 1, 2, 3, 4, 7, 8, 63, 64 })
    void shouldGiveTheScalarVersionsExponentsBytesAndFloats(final int workers)
    {
        final ExponentQuantizer vector = new ExponentQuantizer(workers);
        final ScalarExponentQuantizer scalar = new ScalarExponentQuantizer(workers);
        final SplittableRandom random = new SplittableRandom(0x5EED + workers);
        final float[] values = new float[MAX_BLOCK + SLACK];
        final Buffers heap = new Buffers(new UnsafeBuffer(new byte[4 * (MAX_BLOCK + SLACK)]),
            new UnsafeBuffer(new byte[4 * (MAX_BLOCK + SLACK)]));
        final Buffers direct = new Buffers(new UnsafeBuffer(ByteBuffer.allocateDirect(4 * (MAX_BLOCK + SLACK))),
            new UnsafeBuffer(ByteBuffer.allocateDirect(4 * (MAX_BLOCK + SLACK))));
        final float[] outVector = new float[MAX_BLOCK + SLACK];
        final float[] outScalar = new float[MAX_BLOCK + SLACK];
        int refused = 0;
        for (int trial = 0; trial < 6000; trial++)
        {
            final int count = length(random);
            final int from = random.nextInt(SLACK);
            final int at = random.nextInt(SLACK * 4 - 3);
            final Buffers buffers = random.nextBoolean() ? heap : direct;
            final int kind = random.nextInt(KINDS);
            for (int i = 0; i < count; i++)
            {
                values[from + i] = value(random, kind);
            }

            // The exponent, and the refusal of values without one.
            final Object own = outcome(() -> ScalarExponentQuantizer.exponent(values, from, count));
            assertThat(outcome(() -> ExponentQuantizer.exponent(values, from, count))).as("exponent, trial %d", trial)
                .isEqualTo(own);
            assertThat(outcome(() ->
            {
                ExponentQuantizer.requireQuantizable(values, from, count);
                return "ok";
            })).isEqualTo(outcome(() ->
            {
                ScalarExponentQuantizer.requireQuantizable(values, from, count);
                return "ok";
            }));

            // Quantizing: mostly with an exponent the block fits (its own or a larger one across the workers),
            // sometimes one below its own, which must be refused at the same element after the same writes.
            final int base = own instanceof Integer e ? e : ExponentQuantizer.MAX_EXPONENT;
            final int exponent = switch (random.nextInt(8))
            {
                case 0 -> base - 1 - random.nextInt(3);
                case 1 -> Math.min(ExponentQuantizer.MAX_EXPONENT, base + 1 + random.nextInt(40));
                default -> base;
            };
            buffers.fill(random.nextInt());
            final Object q = outcome(() ->
            {
                vector.quantize(values, from, count, exponent, buffers.vector, at);
                return "ok";
            });
            final Object qRef = outcome(() ->
            {
                scalar.quantize(values, from, count, exponent, buffers.scalar, at);
                return "ok";
            });
            assertThat(q).as("quantize, trial %d (kind %d, %d elements, e = %d)", trial, kind, count, exponent)
                .isEqualTo(qRef);
            refused += q.equals("ok") ? 0 : 1;
            buffers.assertSame("quantized, trial " + trial);

            // Dequantizing: what was quantized, or int32 sums from anywhere in the range.
            if (random.nextInt(3) == 0)
            {
                for (int i = 0; i < count; i++)
                {
                    final int sum = switch (random.nextInt(6))
                    {
                        case 0 -> Integer.MIN_VALUE + random.nextInt(3);
                        case 1 -> Integer.MAX_VALUE - random.nextInt(3);
                        case 2 -> random.nextInt(-1000, 1000);
                        default -> random.nextInt();
                    };
                    buffers.vector.putInt(at + 4 * i, sum, ByteOrder.BIG_ENDIAN);
                    buffers.scalar.putInt(at + 4 * i, sum, ByteOrder.BIG_ENDIAN);
                }
            }
            final int unitExponent = random.nextInt(5) == 0 ?
                random.nextInt(ExponentQuantizer.NO_EXPONENT, ExponentQuantizer.MAX_EXPONENT + 1) : exponent;
            vector.dequantize(buffers.vector, at, count, unitExponent, outVector, from);
            scalar.dequantize(buffers.scalar, at, count, unitExponent, outScalar, from);
            for (int i = 0; i < count; i++)
            {
                if (Float.floatToRawIntBits(outVector[from + i]) != Float.floatToRawIntBits(outScalar[from + i]))
                {
                    assertThat(Float.floatToRawIntBits(outVector[from + i])).as("dequantized, trial %d, element %d " +
                        "(e = %d)", trial, i, unitExponent).isEqualTo(Float.floatToRawIntBits(outScalar[from + i]));
                }
            }
        }
        // Not vacuous: some blocks were refused.
        assertThat(refused).isGreaterThan(100);
    }

    @Test
    void shouldGiveTheScalarVersionsBitsForEveryExponentOnTheLargestAndSmallestValues()
    {
        for (final int workers : new int[] { 1, 4, 64 })
        {
            final ExponentQuantizer vector = new ExponentQuantizer(workers);
            final ScalarExponentQuantizer scalar = new ScalarExponentQuantizer(workers);
            final UnsafeBuffer a = new UnsafeBuffer(ByteBuffer.allocateDirect(4 * 64));
            final UnsafeBuffer b = new UnsafeBuffer(ByteBuffer.allocateDirect(4 * 64));
            for (int e = ExponentQuantizer.MIN_EXPONENT; e <= ExponentQuantizer.MAX_EXPONENT; e++)
            {
                final float largest = Math.nextDown((float)Math.scalb(1.0, e));
                final float[] block = new float[64];
                for (int i = 0; i < 64; i++)
                {
                    final float magnitude = switch (i % 4)
                    {
                        case 0 -> largest;
                        case 1 -> Math.nextDown(largest);
                        case 2 -> Math.scalb(largest, -(i % 30));
                        default -> Float.MIN_VALUE * i;
                    };
                    block[i] = i % 8 < 4 ? magnitude : -magnitude;
                }
                assertThat(ExponentQuantizer.exponent(block, 0, 64)).isEqualTo(e);
                vector.quantize(block, 0, 64, e, a, 0);
                scalar.quantize(block, 0, 64, e, b, 0);
                for (int i = 0; i < 64; i++)
                {
                    assertThat(a.getInt(4 * i)).as("W = %d, e = %d, element %d", workers, e, i)
                        .isEqualTo(b.getInt(4 * i));
                }
            }
        }
    }

    private static final int KINDS = 12;

    private static float value(final SplittableRandom random, final int kind)
    {
        final float uniform = (float)(random.nextDouble() * 2 - 1);
        return switch (kind)
        {
            case 0 -> uniform;
            case 1 -> random.nextBoolean() ? 0.0f : -0.0f;
            case 2 -> Float.intBitsToFloat(random.nextInt(0, 0x80_0000) | (random.nextBoolean() ? 0x8000_0000 : 0));
            case 3 -> uniform * 1e30f;
            case 4 -> uniform * 1e-38f; // near and below the smallest normal
            case 5 -> switch (random.nextInt(4))
            {
                case 0 -> uniform * 1e6f;
                case 1 -> Float.MIN_NORMAL * (random.nextBoolean() ? 1 : -1);
                case 2 -> Math.scalb(1.0f, random.nextInt(-149, 127)) * (random.nextBoolean() ? 1 : -1);
                default -> 0.0f;
            };
            case 6 -> -Math.abs(uniform);
            // Just below 2^127 and the largest values of lower exponents.
            case 7 -> Math.nextDown(Math.scalb(1.0f, random.nextInt(120, 128))) * (random.nextBoolean() ? 1 : -1);
            // Any finite bits below 2^127.
            case 8 -> Float.intBitsToFloat(random.nextInt(0, 0x7F00_0000) | (random.nextBoolean() ? 0x8000_0000 : 0));
            // Now and then a value without an exponent among ordinary ones.
            case 9 -> random.nextInt(64) != 0 ? uniform : switch (random.nextInt(5))
            {
                case 0 -> Float.NaN;
                case 1 -> Float.intBitsToFloat(0xFFC0_0001); // a NaN with sign and payload
                case 2 -> Float.POSITIVE_INFINITY;
                case 3 -> Float.NEGATIVE_INFINITY;
                default -> Math.scalb(1.0f, 127) * (random.nextBoolean() ? 1 : -1);
            };
            case 10 -> Math.scalb(uniform, random.nextInt(-40, 40));
            default -> (float)random.nextInt(-3, 4); // ties and small integers
        };
    }

    private static int length(final SplittableRandom random)
    {
        return switch (random.nextInt(6))
        {
            case 0 -> random.nextInt(1, 33);
            case 1 -> 256;
            case 2 -> 2048;
            case 3 -> 64 * random.nextInt(1, 33);
            default -> random.nextInt(1, MAX_BLOCK + 1);
        };
    }

    /**
     * @return the value, or the exception's class and message.
     */
    private static Object outcome(final Callable<Object> call)
    {
        try
        {
            return call.call();
        }
        catch (final Exception ex)
        {
            return ex.getClass().getName() + ": " + ex.getMessage();
        }
    }

    private record Buffers(MutableDirectBuffer vector, MutableDirectBuffer scalar)
    {
        void fill(final int pattern)
        {
            for (int i = 0; i + 4 <= vector.capacity(); i += 4)
            {
                vector.putInt(i, pattern);
                scalar.putInt(i, pattern);
            }
        }

        void assertSame(final String what)
        {
            for (int i = 0; i < vector.capacity(); i++)
            {
                if (vector.getByte(i) != scalar.getByte(i))
                {
                    assertThat(vector.getByte(i)).as("%s: byte %d", what, i).isEqualTo(scalar.getByte(i));
                }
            }
        }
    }
}
