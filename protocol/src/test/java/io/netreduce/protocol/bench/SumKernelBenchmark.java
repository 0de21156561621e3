package io.netreduce.protocol.bench;

import io.netreduce.protocol.element.ScalarSumKernel;
import io.netreduce.protocol.element.SumKernel;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.support.Gradients;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * The summation kernel on one aggregator's worth of data (W payloads of {@code bytes}, laid out as in the
 * aggregator region), next to a plain copy of the same W payloads in the same run: the ratio says how far the
 * kernel is from memory speed. {@code scalar} is the scalar rank-order kernel ({@link ScalarSumKernel}, what fp16
 * and bf16 used before the Vector API version) on the same data.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class SumKernelBenchmark
{
    @Param({ "2", "4", "8", "16" })
    public int ranks;

    @Param({ "FP32", "FP16", "BF16", "INT32" })
    public ElementType type;

    @Param({ "4096" })
    public int bytes;

    private MemorySegment segment;
    private MemorySegment copyTarget;
    private long stride;

    @Setup
    public void setUp()
    {
        stride = (bytes + 63) & ~63;
        segment = Arena.ofAuto().allocate(stride * (ranks + 1), 64);
        copyTarget = Arena.ofAuto().allocate(stride * ranks, 64);
        final Random random = new Random(42);
        for (int r = 0; r < ranks; r++)
        {
            MemorySegment.copy(MemorySegment.ofArray(Gradients.random(type, bytes, random)), 0, segment, r * stride,
                bytes);
        }
    }

    @Benchmark
    public MemorySegment sum()
    {
        SumKernel.sum(type, segment, 0, stride, ranks, ranks * stride, bytes);
        return segment;
    }

    @Benchmark
    public MemorySegment scalar()
    {
        ScalarSumKernel.sum(type, segment, 0, stride, ranks, ranks * stride, bytes);
        return segment;
    }

    @Benchmark
    public MemorySegment memcpy()
    {
        MemorySegment.copy(segment, 0, copyTarget, 0, ranks * stride);
        return copyTarget;
    }
}
