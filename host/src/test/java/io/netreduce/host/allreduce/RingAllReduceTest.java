package io.netreduce.host.allreduce;

import io.netreduce.protocol.element.ElementType;
import io.netreduce.host.rc.RcConfig;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RingAllReduceTest
{
    private static final long SEED = 77;

    @ParameterizedTest(name = "W={0} {1} elements={2} pmtu={3} drop={4}")
    @CsvSource({
        "2, fp32, 100000, 1024, 0",
        "3, fp32, 100001, 1024, 0",
        "4, fp32, 65536, 4096, 0",
        "2, int32, 50000, 1024, 0.01",
        "3, int32, 77777, 2048, 0.01",
        "4, int32, 40000, 1024, 0.01",
        "3, fp16, 60001, 1024, 0.01",
        "4, bf16, 60000, 1024, 0",
        "4, fp32, 3, 256, 0",
        "3, fp16, 1, 256, 0",
    })
    void shouldSumExactlyInRingOrderOverMemoryPorts(
        final int world, final String typeName, final int elements, final int pmtu, final double drop)
    {
        final ElementType type = ElementType.parse(typeName);
        final int bytes = elements * type.size();
        final int segment = 16 * 1024;
        try (RingHarness ring = new RingHarness(world,
            r -> new RcConfig().pmtu(pmtu).sendDropProbability(drop).faultSeed(SEED + r),
            RingAllReduce.sendRegionBytes(bytes, world), RingAllReduce.receiveRegionBytes(bytes, world)))
        {
            final RingAllReduce[] ops = new RingAllReduce[world];
            for (int r = 0; r < world; r++)
            {
                ops[r] = new RingAllReduce(ring.links[r], segment, 2_000_000_000L);
            }
            for (int iteration = 0; iteration < 2; iteration++)
            {
                final Tensor[] tensors = new Tensor[world];
                for (int r = 0; r < world; r++)
                {
                    tensors[r] = new Tensor(type, new UnsafeBuffer(ByteBuffer.allocateDirect(bytes + 8)), 8,
                        elements);
                    TensorPattern.fill(tensors[r], SEED, r, iteration);
                    ops[r].begin(tensors[r]);
                }
                ring.runToCompletion(ops, 2_000_000);

                final int it = iteration;
                final Arithmetic.Inputs inputs = (rank, index) -> TensorPattern.bits(type, SEED, rank, it, index);
                final int chunkElements = (elements + world - 1) / world;
                for (int r = 0; r < world; r++)
                {
                    for (int i = 0; i < elements; i++)
                    {
                        final int expected = Arithmetic.ringOrderSum(type, world, chunkElements, inputs, i);
                        final int actual = Arithmetic.get(tensors[r], i);
                        if (actual != expected)
                        {
                            throw new AssertionError("rank " + r + " iteration " + iteration + " element " + i +
                                ": expected 0x" + Integer.toHexString(expected) + " got 0x" +
                                Integer.toHexString(actual));
                        }
                    }
                }
            }
            for (int r = 0; r < world; r++)
            {
                // 2(W-1) chunks of ceil(n/W) elements per call, two calls.
                final long chunk = (long)((elements + world - 1) / world) * type.size();
                assertThat(ops[r].bytesPosted()).isEqualTo(2L * 2 * (world - 1) * chunk);
            }
        }
    }

    @ParameterizedTest(name = "W={0} drop={1}")
    @CsvSource({ "3, 0", "4, 0", "3, 0.01", "4, 0.01" })
    void shouldAcceptThePredecessorsNextCallStartingBeforeThisRanksCallHasFinished(
        final int world, final double drop)
    {
        // Each rank starts its next call as soon as its own call is done, as independent workers do. A rank whose
        // last sends are still unacknowledged has already received everything of its call, and its predecessor,
        // done, may already be writing the next call's first segments: those must wait for the next call, not fail
        // the current one.
        final int elements = 30_000;
        final int bytes = elements * Float.BYTES;
        final int calls = 6;
        try (RingHarness ring = new RingHarness(world,
            r -> new RcConfig().pmtu(1024).sendDropProbability(drop).faultSeed(SEED * 7 + r),
            RingAllReduce.sendRegionBytes(bytes, world), RingAllReduce.receiveRegionBytes(bytes, world)))
        {
            final RingAllReduce[] ops = new RingAllReduce[world];
            final Tensor[][] tensors = new Tensor[world][calls];
            final int[] call = new int[world];
            for (int r = 0; r < world; r++)
            {
                ops[r] = new RingAllReduce(ring.links[r], 8 * 1024, 2_000_000_000L);
                for (int c = 0; c < calls; c++)
                {
                    tensors[r][c] = new Tensor(ElementType.FP32,
                        new UnsafeBuffer(ByteBuffer.allocateDirect(bytes)), 0, elements);
                    TensorPattern.fill(tensors[r][c], SEED, r, c);
                }
                ops[r].begin(tensors[r][0]);
            }
            int finished = 0;
            for (int step = 0; finished < world && step < 3_000_000; step++)
            {
                ring.step(ops);
                for (int r = 0; r < world; r++)
                {
                    if (call[r] < calls && ops[r].isDone())
                    {
                        if (++call[r] < calls)
                        {
                            ops[r].begin(tensors[r][call[r]]);
                        }
                        else
                        {
                            finished++;
                        }
                    }
                }
            }
            assertThat(call).as("calls completed per rank").containsOnly(calls);
            final int chunkElements = (elements + world - 1) / world;
            for (int c = 0; c < calls; c++)
            {
                final int it = c;
                final Arithmetic.Inputs inputs = (rank, index) ->
                    TensorPattern.bits(ElementType.FP32, SEED, rank, it, index);
                for (int r = 0; r < world; r++)
                {
                    for (int i = 0; i < elements; i++)
                    {
                        final int expected = Arithmetic.ringOrderSum(ElementType.FP32, world, chunkElements, inputs, i);
                        if (Arithmetic.get(tensors[r][c], i) != expected)
                        {
                            throw new AssertionError("rank " + r + " call " + c + " element " + i);
                        }
                    }
                }
            }
        }
    }

    @Test
    void shouldMatchTheRankOrderSumForExactlyRepresentableValues()
    {
        final int world = 4;
        final int elements = 10_000;
        final ElementType type = ElementType.FP32;
        try (RingHarness ring = new RingHarness(world, r -> new RcConfig().pmtu(1024),
            RingAllReduce.sendRegionBytes(elements * 4, world), RingAllReduce.receiveRegionBytes(elements * 4, world)))
        {
            final RingAllReduce[] ops = new RingAllReduce[world];
            final Tensor[] tensors = new Tensor[world];
            for (int r = 0; r < world; r++)
            {
                ops[r] = new RingAllReduce(ring.links[r], 4096, 1_000_000_000L);
                tensors[r] = new Tensor(type, new UnsafeBuffer(ByteBuffer.allocateDirect(elements * 4)), 0, elements);
                for (int i = 0; i < elements; i++)
                {
                    Arithmetic.put(tensors[r], i, Float.floatToRawIntBits((i % 1000) * 0.25f + r));
                }
                ops[r].begin(tensors[r]);
            }
            ring.runToCompletion(ops, 1_000_000);
            for (int r = 0; r < world; r++)
            {
                for (int i = 0; i < elements; i++)
                {
                    assertThat(Float.intBitsToFloat(Arithmetic.get(tensors[r], i)))
                        .isEqualTo(4 * ((i % 1000) * 0.25f) + 6);
                }
            }
        }
    }

    @Test
    void shouldFailWithClearErrorWhenAPeerStopsInsteadOfHanging()
    {
        final int world = 3;
        final int elements = 50_000;
        try (RingHarness ring = new RingHarness(world, r -> new RcConfig().pmtu(1024).retryCount(3),
            RingAllReduce.sendRegionBytes(elements * 4, world), RingAllReduce.receiveRegionBytes(elements * 4, world)))
        {
            final RingAllReduce[] ops = new RingAllReduce[world];
            for (int r = 0; r < world; r++)
            {
                ops[r] = new RingAllReduce(ring.links[r], 16 * 1024, 100_000_000L);
            }
            final Tensor tensor = new Tensor(ElementType.FP32, new UnsafeBuffer(ByteBuffer.allocateDirect(elements * 4)),
                0, elements);
            // Ranks 0 and 1 start; rank 2 never does and its endpoint is closed (a dead process).
            ops[0].begin(tensor);
            ops[1].begin(new Tensor(ElementType.FP32, new UnsafeBuffer(ByteBuffer.allocateDirect(elements * 4)), 0,
                elements));
            ring.endpoints[2].close();
            final AllReduce[] live = { ops[0], ops[1] };
            final long start = ring.clock.nanoTime();
            assertThatThrownBy(() -> ring.runToCompletion(live, 1_000_000))
                .isInstanceOf(AllReduceException.class)
                .hasMessageMatching("(?s).*(stalled for 100 ms|send failed: RETRY_EXCEEDED).*");
            assertThat(ring.clock.nanoTime() - start).isLessThan(5_000_000_000L);
        }
    }
}
