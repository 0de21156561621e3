package io.netreduce.host.switchml;

import io.netreduce.dataplane.counters.DataplaneCounter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Our SwitchML workers through the real dataplane on memory ports, int32: every worker's tensor summed exactly
 * (wrapping), with losses on the way to the appliance (its fault injection) and on the way back (dropped here); calls
 * and jobs one after another; the job byte of each call.
 */
class SwitchMlWorkerTest
{
    /** The job's id: nothing the workers send (the appliance finds the job by their addresses). */
    private static final int JOB = 3;
    private static final int OUTSTANDING = 16;
    /** Ethernet, IPv4 without options, UDP, then the message type and size byte. */
    private static final int JOB_BYTE_OFFSET = 14 + 20 + 8 + 1;

    @ParameterizedTest(name = "W = {0}, {1} elements per packet, loss {2}")
    @CsvSource({
        "4, 64, 0.0", "4, 64, 0.01", "4, 64, 0.05",
        "4, 256, 0.0", "4, 256, 0.01", "4, 256, 0.05",
        "4, 1024, 0.0", "4, 1024, 0.01", "4, 1024, 0.05",
        "8, 256, 0.05", "2, 64, 0.0" })
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldSumEveryWorkersTensorExactlyInEachOfThreeCallsInARow(
        final int workers, final int k, final double loss)
    {
        try (SwitchMlBed bed = new SwitchMlBed(workers, loss, 5))
        {
            bed.install(JOB, k, OUTSTANDING);
            final SwitchMlWorker[] worker = bed.workers(0, k, OUTSTANDING);
            final SplittableRandom random = new SplittableRandom(workers * 31L + k);
            // Not multiples of k (the last packet is padded); the second has fewer blocks than packets in flight.
            for (final int n : new int[] { 50 * k + k / 2 + 1, 3 * k + 1, 20 * k })
            {
                callAndCheck(bed, worker, random, n);
            }
            assertThat(bed.counter(DataplaneCounter.DROP_SWITCHML_NOT_MEMBER)).isZero();
            assertThat(bed.counter(DataplaneCounter.DROP_SWITCHML_WRONG_SIZE)).isZero();
            long retransmissions = 0;
            for (final SwitchMlWorker each : worker)
            {
                retransmissions += each.retransmissions();
            }
            if (loss > 0)
            {
                assertThat(retransmissions).isPositive();
            }
            else
            {
                // Every worker takes its results (whichever worker's port they are addressed to): nothing times out.
                assertThat(retransmissions).isZero();
            }
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldSumExactlyInASecondJobInstalledAfterTheFirstWasRemoved()
    {
        try (SwitchMlBed bed = new SwitchMlBed(4, 0.05, 11))
        {
            final SplittableRandom random = new SplittableRandom(12);
            bed.install(JOB, 64, OUTSTANDING);
            callAndCheck(bed, bed.workers(0, 64, OUTSTANDING), random, 40 * 64 + 5);
            bed.remove(JOB);

            // Other element count, pool and id, the same workers' addresses: a fresh pool, new worker processes.
            bed.install(200, 256, 2 * OUTSTANDING);
            final SwitchMlWorker[] second = bed.workers(17, 256, 2 * OUTSTANDING);
            callAndCheck(bed, second, random, 90 * 256 + 7);
            callAndCheck(bed, second, random, 90 * 256 + 7);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldStretchItsTimeoutToTheRoundTripItMeasuresInsteadOfResendingEveryPacket()
    {
        try (SwitchMlBed bed = new SwitchMlBed(4, 0.0, 21))
        {
            final int k = 64;
            bed.install(JOB, k, OUTSTANDING);
            final SwitchMlWorker[] worker = bed.workers(0, k, OUTSTANDING);
            // A round trip of a step or two of 3 ms, three times the configured timeout (a loaded, shaped path).
            bed.stepNs(3 * SwitchMlBed.TIMEOUT_NS);
            final SplittableRandom random = new SplittableRandom(22);
            callAndCheck(bed, worker, random, 40 * OUTSTANDING * k);
            final long firstCall = worker[0].retransmissions();
            callAndCheck(bed, worker, random, 40 * OUTSTANDING * k);

            assertThat(worker[0].retransmissionTimeoutNs()).isGreaterThan(3 * SwitchMlBed.TIMEOUT_NS);
            // The first packets time out before any round trip is known; once timed, none does.
            assertThat(firstCall).isLessThanOrEqualTo(2L * OUTSTANDING);
            assertThat(worker[0].retransmissions()).isEqualTo(firstCall);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldIgnoreResultsThatCarryThePreviousCallsJobByte()
    {
        try (SwitchMlBed bed = new SwitchMlBed(4, 0.0, 13))
        {
            final int k = 64;
            bed.install(JOB, k, OUTSTANDING);
            final SwitchMlWorker[] worker = bed.workers(0, k, OUTSTANDING);
            final SplittableRandom random = new SplittableRandom(14);
            final List<byte[]> firstCallsResults = new ArrayList<>();
            bed.tap(0, firstCallsResults::add);
            callAndCheck(bed, worker, random, 10 * k);
            bed.tap(0, null);
            assertThat(firstCallsResults).hasSize(10);

            // The same size again: the first call's results name packets (TSIs) the second call has in flight, and
            // only their job byte tells them apart. Delivered late, before any of the second call's, they must not
            // be taken for its results.
            final int n = 10 * k;
            final int[][] tensors = new int[4][];
            final int[] expected = inputs(random, tensors, n);
            for (int w = 0; w < 4; w++)
            {
                worker[w].begin(tensors[w]);
            }
            for (final byte[] late : firstCallsResults)
            {
                bed.port(0).inject(late);
            }
            bed.drive(worker);

            assertThat(worker[0].strayResults()).isEqualTo(firstCallsResults.size());
            for (int w = 0; w < 4; w++)
            {
                assertThat(tensors[w]).as("worker " + w).isEqualTo(expected);
            }
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldCarryTheFirstJobByteInTheFirstCallAndOneMorePerCallWrappingAt256()
    {
        try (SwitchMlBed bed = new SwitchMlBed(2, 0.0, 15))
        {
            final int k = 64;
            bed.install(JOB, k, OUTSTANDING);
            final SwitchMlWorker[] worker = bed.workers(254, k, OUTSTANDING);
            final SplittableRandom random = new SplittableRandom(16);
            final List<Integer> echoed = new ArrayList<>();
            bed.tap(1, result -> echoed.add(result[JOB_BYTE_OFFSET] & 0xFF));
            final List<Integer> jobBytes = new ArrayList<>();
            for (int call = 0; call < 3; call++)
            {
                echoed.clear();
                callAndCheck(bed, worker, random, 3 * k);
                jobBytes.add(worker[1].jobByte());
                assertThat(echoed).as("the job byte the appliance echoed in call " + call).containsOnly(
                    worker[1].jobByte());
            }
            assertThat(jobBytes).containsExactly(254, 255, 0);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldSumOnlyTheFirstLengthElementsOfALargerArray()
    {
        try (SwitchMlBed bed = new SwitchMlBed(3, 0.01, 17))
        {
            final int k = 64;
            bed.install(JOB, k, OUTSTANDING);
            final SwitchMlWorker[] worker = bed.workers(0, k, OUTSTANDING);
            final SplittableRandom random = new SplittableRandom(18);
            // One array per worker for calls of any size, as a sidecar keeps: a call of n sums the first n only.
            final int capacity = 40 * k;
            final int[][] arrays = new int[3][];
            inputs(random, arrays, capacity);
            for (final int n : new int[] { 30 * k + 5, 1, capacity })
            {
                final int[][] before = new int[3][];
                final int[] expected = new int[n];
                for (int w = 0; w < 3; w++)
                {
                    before[w] = arrays[w].clone();
                    for (int i = 0; i < n; i++)
                    {
                        expected[i] += arrays[w][i];
                    }
                    worker[w].begin(arrays[w], n);
                }
                bed.drive(worker);
                for (int w = 0; w < 3; w++)
                {
                    assertThat(Arrays.copyOf(arrays[w], n)).as("worker " + w + ", " + n).isEqualTo(expected);
                    assertThat(Arrays.copyOfRange(arrays[w], n, capacity)).as("beyond the call")
                        .isEqualTo(Arrays.copyOfRange(before[w], n, capacity));
                }
            }
            assertThatThrownBy(() -> worker[0].begin(new int[4], 5)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("a call of 5 elements on an array of 4");
        }
    }

    /**
     * One call of every worker on fresh random tensors of {@code n} elements, checked against the exact (wrapping)
     * sum.
     */
    private static void callAndCheck(
        final SwitchMlBed bed, final SwitchMlWorker[] worker, final SplittableRandom random, final int n)
    {
        final int[][] tensors = new int[worker.length][];
        final int[] expected = inputs(random, tensors, n);
        for (int w = 0; w < worker.length; w++)
        {
            worker[w].begin(tensors[w]);
        }
        bed.drive(worker);
        for (int w = 0; w < worker.length; w++)
        {
            assertThat(tensors[w]).as("worker " + w + ", " + n + " elements").isEqualTo(expected);
        }
    }

    /**
     * Fill {@code tensors} with random inputs of {@code n} elements.
     *
     * @return their sum, wrapping.
     */
    private static int[] inputs(final SplittableRandom random, final int[][] tensors, final int n)
    {
        final int[] expected = new int[n];
        for (int w = 0; w < tensors.length; w++)
        {
            tensors[w] = new int[n];
            for (int i = 0; i < n; i++)
            {
                tensors[w][i] = random.nextInt();
                expected[i] += tensors[w][i];
            }
        }
        return expected;
    }
}
