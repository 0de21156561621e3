package io.netreduce.host.switchml;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Our SwitchML workers all-reducing fp32 through the real dataplane on memory ports: block fixed point with the
 * exponent look-ahead, results within {@link ExponentQuantizer#errorBound} of the exact sum and the same bit for bit
 * whatever was lost on the way, with calls of both types one after another on the same slots.
 */
class SwitchMlFp32Test
{
    private static final int JOB = 9;
    private static final int OUTSTANDING = 16;

    @ParameterizedTest(name = "W = {0}, {1} elements per packet, loss {2}")
    @CsvSource({
        "4, 64, 0.0", "4, 64, 0.01", "4, 64, 0.05",
        "4, 256, 0.0", "4, 256, 0.01", "4, 256, 0.05",
        "4, 1024, 0.0", "4, 1024, 0.01", "4, 1024, 0.05",
        "8, 256, 0.05", "2, 64, 0.01" })
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void shouldSumWithinTheBoundAndTheSameBitForBitInTwoRunsWithDifferentLosses(
        final int workers, final int k, final double loss)
    {
        // Fewer blocks than packets in flight (5k + 1, 1) take the layout that departs from the client's.
        final int[] sizes = { 40 * k + 3, 5 * k + 1, 1, 17 * k };
        final List<float[][]> first = run(workers, k, loss, 21, sizes);
        final List<float[][]> second = run(workers, k, loss, 22, sizes);
        for (int call = 0; call < sizes.length; call++)
        {
            final float[][] inputs = Fp32Inputs.tensors(workers, sizes[call], k, call);
            for (int w = 0; w < workers; w++)
            {
                final float[] result = first.get(call)[w];
                assertThat(Fp32Inputs.outsideBound(inputs, result, k)).as("call " + call + ", worker " + w).isNull();
                assertThat(bits(result)).as("call " + call + ", worker " + w + " against worker 0")
                    .isEqualTo(bits(first.get(call)[0]));
                assertThat(bits(second.get(call)[w])).as("call " + call + ", worker " + w + " in the second run")
                    .isEqualTo(bits(result));
            }
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldKeepEachCallRightWhenFp32AndInt32CallsTakeTurnsOnTheSameSlots()
    {
        final int workers = 4;
        final int k = 64;
        try (SwitchMlBed bed = new SwitchMlBed(workers, 0.05, 31))
        {
            bed.install(JOB, k, OUTSTANDING);
            final SwitchMlWorker[] worker = bed.workers(100, k, OUTSTANDING);
            final SplittableRandom random = new SplittableRandom(32);
            for (int round = 0; round < 2; round++)
            {
                // A short fp32 call (the sparse layout), a long int32 one, a long fp32 one, a short int32 one.
                fp32Call(bed, worker, 3 * k + 1, k, round);
                int32Call(bed, worker, random, 30 * k);
                fp32Call(bed, worker, 30 * k - 1, k, round + 10);
                int32Call(bed, worker, random, 2 * k);
            }
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldNotReuseASetWhoseResultAWorkerStillAwaitsWhenACallHasFewerBlocksThanPacketsInFlight()
    {
        final int k = 64;
        final int outstanding = 10;
        try (SwitchMlBed bed = new SwitchMlBed(2, 0.0, 61))
        {
            bed.install(JOB, k, outstanding);
            final SwitchMlWorker[] worker = bed.workers(0, k, outstanding);
            // 6 blocks: exponent packets 0..5, data packets 6..11. Worker 1 loses the result of packet 0 once and
            // gets the others. Placed as the client places them, data packet 10 would take position 10, the other
            // set of packet 0's slot, as soon as packet 4's result is in: that clears worker 1's bit in packet 0's
            // set, and its retransmission of packet 0 would open a new round there instead of fetching the result.
            final boolean[] lost = new boolean[1];
            bed.dropBack(result ->
            {
                final boolean drop = !lost[0] && result[33] == 2 && tsi(result) == 0;
                lost[0] |= drop;
                return drop;
            });
            fp32Call(bed, worker, 6 * k, k, 71);
            assertThat(lost[0]).isTrue();
            assertThat(worker[1].retransmissions()).isPositive();
            fp32Call(bed, worker, 6 * k, k, 72);
            fp32Call(bed, worker, 30 * k, k, 73);
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(floats = { Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, 0x1.0p127f,
        -Float.MAX_VALUE })
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldRefuseATensorWithoutABlockExponentBeforeSendingAnything(final float bad)
    {
        final int workers = 2;
        final int k = 64;
        try (SwitchMlBed bed = new SwitchMlBed(workers, 0.0, 41))
        {
            bed.install(JOB, k, OUTSTANDING);
            final SwitchMlWorker[] worker = bed.workers(5, k, OUTSTANDING);
            final float[] tensor = new float[4 * k];
            tensor[70] = bad;

            assertThatThrownBy(() -> worker[0].begin(tensor))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("element 70 is " + bad)
                .hasMessageContaining("below 2^127");
            assertThat(bed.port(0).drainSent()).isEmpty();

            // The refused call did not count: the next carries the first job byte, and sums as any other.
            fp32Call(bed, worker, 4 * k, k, 3);
            assertThat(worker[0].jobByte()).isEqualTo(5);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldSumTensorsOfZerosToZeros()
    {
        try (SwitchMlBed bed = new SwitchMlBed(3, 0.01, 51))
        {
            bed.install(JOB, 256, OUTSTANDING);
            final SwitchMlWorker[] worker = bed.workers(0, 256, OUTSTANDING);
            final float[][] tensors = new float[3][20 * 256];
            tensors[1][7] = -0.0f;
            for (int w = 0; w < 3; w++)
            {
                worker[w].begin(tensors[w]);
            }
            bed.drive(worker);
            for (int w = 0; w < 3; w++)
            {
                assertThat(bits(tensors[w])).as("worker " + w).containsOnly(0);
            }
        }
    }

    /**
     * @return each call's results, per worker.
     */
    private static List<float[][]> run(
        final int workers, final int k, final double loss, final long lossSeed, final int[] sizes)
    {
        final List<float[][]> results = new ArrayList<>();
        try (SwitchMlBed bed = new SwitchMlBed(workers, loss, lossSeed))
        {
            bed.install(JOB, k, OUTSTANDING);
            final SwitchMlWorker[] worker = bed.workers(0, k, OUTSTANDING);
            for (int call = 0; call < sizes.length; call++)
            {
                final float[][] tensors = Fp32Inputs.tensors(workers, sizes[call], k, call);
                for (int w = 0; w < workers; w++)
                {
                    worker[w].begin(tensors[w]);
                }
                bed.drive(worker);
                results.add(tensors);
            }
        }
        return results;
    }

    private static void fp32Call(
        final SwitchMlBed bed, final SwitchMlWorker[] worker, final int n, final int k, final long seed)
    {
        final float[][] inputs = Fp32Inputs.tensors(worker.length, n, k, seed);
        final float[][] tensors = new float[worker.length][];
        for (int w = 0; w < worker.length; w++)
        {
            tensors[w] = inputs[w].clone();
            worker[w].begin(tensors[w]);
        }
        bed.drive(worker);
        for (int w = 0; w < worker.length; w++)
        {
            assertThat(Fp32Inputs.outsideBound(inputs, tensors[w], k)).as("fp32, " + n + " elements, worker " + w)
                .isNull();
        }
    }

    private static void int32Call(
        final SwitchMlBed bed, final SwitchMlWorker[] worker, final SplittableRandom random, final int n)
    {
        final int[][] tensors = new int[worker.length][n];
        final int[] expected = new int[n];
        for (int w = 0; w < worker.length; w++)
        {
            for (int i = 0; i < n; i++)
            {
                tensors[w][i] = random.nextInt();
                expected[i] += tensors[w][i];
            }
            worker[w].begin(tensors[w]);
        }
        bed.drive(worker);
        for (int w = 0; w < worker.length; w++)
        {
            assertThat(tensors[w]).as("int32, " + n + " elements, worker " + w).isEqualTo(expected);
        }
    }

    private static int tsi(final byte[] frame)
    {
        return ByteBuffer.wrap(frame, 14 + 20 + 8 + 2, 4).getInt();
    }

    private static int[] bits(final float[] values)
    {
        final int[] bits = new int[values.length];
        for (int i = 0; i < values.length; i++)
        {
            bits[i] = Float.floatToRawIntBits(values[i]);
        }
        return bits;
    }
}
