package io.netreduce.host.bench;

import io.netreduce.host.switchml.ExponentQuantizer;
import io.netreduce.host.switchml.ScalarExponentQuantizer;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * SwitchML's fp32 block fixed point per packet, as a worker does it: the block's exponent (the look-ahead), the
 * block quantized into an off-heap packet buffer (as the port's ring is) and a result dequantized back into the
 * tensor, for the Vector API {@link ExponentQuantizer} ({@code vector}) and the element-by-element version it
 * replaced ({@link ScalarExponentQuantizer}, {@code scalar}) in the same run. Operations per second are packets per
 * second of one worker's CPU (each way). The teardown checks that both gave the same bits.
 * <p>
 * {@code scripts/bench-host.sh -f 1 -wi 3 -i 5}
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class QuantizerBenchmark
{
    @Param({ "256", "2048" })
    public int elements;

    @Param({ "4" })
    public int workers;

    private static final int BLOCKS = 64;

    private float[] tensor;
    private float[] resultVector;
    private float[] resultScalar;
    private UnsafeBuffer packet;
    private ExponentQuantizer vector;
    private ScalarExponentQuantizer scalar;
    private int block;

    @Setup
    public void setUp()
    {
        // A few blocks of gradient-like values (uniform, with magnitudes that vary from block to block), so that the
        // data is not one block in L1 with one exponent.
        final SplittableRandom random = new SplittableRandom(42);
        tensor = new float[BLOCKS * elements];
        for (int i = 0; i < tensor.length; i++)
        {
            tensor[i] = Math.scalb((float)(random.nextDouble() * 2 - 1), -((i / elements) % 12));
        }
        resultVector = new float[tensor.length];
        resultScalar = new float[tensor.length];
        packet = new UnsafeBuffer(ByteBuffer.allocateDirect(64 + elements * Integer.BYTES));
        vector = new ExponentQuantizer(workers);
        scalar = new ScalarExponentQuantizer(workers);
    }

    @Benchmark
    public float vector()
    {
        final int from = next();
        final int exponent = ExponentQuantizer.exponent(tensor, from, elements) + 1;
        vector.quantize(tensor, from, elements, exponent, packet, 42);
        vector.dequantize(packet, 42, elements, exponent, resultVector, from);
        return resultVector[from];
    }

    @Benchmark
    public float scalar()
    {
        final int from = next();
        final int exponent = ScalarExponentQuantizer.exponent(tensor, from, elements) + 1;
        scalar.quantize(tensor, from, elements, exponent, packet, 42);
        scalar.dequantize(packet, 42, elements, exponent, resultScalar, from);
        return resultScalar[from];
    }

    private int next()
    {
        block = block + 1 == BLOCKS ? 0 : block + 1;
        return block * elements;
    }

    @TearDown(Level.Trial)
    public void check()
    {
        // After the measurement, with the measured version compiled: both versions must agree on every block.
        for (int b = 0; b < BLOCKS; b++)
        {
            final int from = b * elements;
            final int exponent = ExponentQuantizer.exponent(tensor, from, elements) + 1;
            final UnsafeBuffer other = new UnsafeBuffer(ByteBuffer.allocateDirect(elements * Integer.BYTES));
            final float[] v = new float[elements];
            final float[] s = new float[elements];
            vector.quantize(tensor, from, elements, exponent, packet, 42);
            scalar.quantize(tensor, from, elements, exponent, other, 0);
            for (int i = 0; i < elements; i++)
            {
                if (packet.getInt(42 + 4 * i) != other.getInt(4 * i))
                {
                    throw new IllegalStateException("vector and scalar quantized element " + (from + i) +
                        " differently");
                }
            }
            vector.dequantize(packet, 42, elements, exponent, v, 0);
            scalar.dequantize(other, 0, elements, exponent, s, 0);
            if (!Arrays.equals(v, s))
            {
                throw new IllegalStateException("vector and scalar dequantized block " + b + " differently");
            }
        }
    }
}
