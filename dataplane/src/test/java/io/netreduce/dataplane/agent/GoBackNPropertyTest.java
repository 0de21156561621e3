package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.RingSimulation;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.protocol.testing.SeededCases;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Under any arrival order, duplication, loss of gradient packets (first packets included) and loss of result
 * packets, with RC go-back-N retransmission, every connection delivers exactly the bytes of the lossless run
 * and no aggregator is left behind. Cases are drawn from a seeded {@link SplittableRandom} (the seed is printed on
 * failure; replay with {@code -Dnetreduce.test.seed}).
 */
class GoBackNPropertyTest
{
    private static final int CASES = 40;
    private static final ElementType[] TYPES = ElementType.values();

    @Test
    void shouldDeliverTheLosslessBytesWhateverIsLostDuplicatedOrReordered()
    {
        SeededCases.run("go-back-N ring", CASES, (random, index) -> checkCase(random));
    }

    private static void checkCase(final SplittableRandom random)
    {
        final int ranks = random.nextInt(2, 5);
        final int window = 1 << random.nextInt(3);
        final int msgLen = random.nextInt(1, 6);
        final int messages = random.nextInt(1, 11);
        final ElementType type = TYPES[random.nextInt(TYPES.length)];
        final long seed = random.nextLong(1_000_000);
        final double dropIn = random.nextDouble(0.2);
        final double duplicate = random.nextDouble(0.2);
        final double dropOut = random.nextDouble(0.2);
        final double spuriousTimeout = random.nextDouble(0.02);
        final RingDefinition config = Rings.ring(3, ranks, type, window, msgLen, 64);
        final List<List<byte[]>> lossless;
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            lossless = RingSimulation.lossless(harness, config, messages, seed).run().delivered();
        }
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            final RingSimulation lossy = new RingSimulation(harness, config, messages, seed, seed * 7 + 1,
                dropIn, duplicate, dropOut, spuriousTimeout).run();
            for (int rank = 0; rank < ranks; rank++)
            {
                final List<byte[]> got = lossy.delivered().get(rank);
                assertThat(got).as("connection %d", rank).hasSameSizeAs(lossless.get(rank));
                for (int i = 0; i < got.size(); i++)
                {
                    assertThat(got.get(i)).as("connection %d packet %d", rank, i).isEqualTo(lossless.get(rank).get(i));
                }
                for (int m = 0; m < messages; m++)
                {
                    assertThat(lossy.deliveredMessage(rank, m)).isEqualTo(lossy.expectedMessage(rank, m));
                }
            }
            assertThat(lossy.badIcrcResults()).isZero();
            assertThat(harness.counter(DataplaneCounter.DROP_BAD_ICRC)).isZero();
            assertThat(harness.counter(DataplaneCounter.DROP_AGGREGATOR_BUSY)).isZero();
            RingAggregationTest.assertNoLeaks(harness, config, messages);
        }
    }

    @Test
    void shouldDeliverLosslessBytesWhenTheApplianceItselfDropsFrames()
    {
        final RingDefinition config = Rings.ring(4, 4, ElementType.FP32, 4, 5, 64);
        final int messages = 24;
        final List<List<byte[]>> lossless;
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            lossless = RingSimulation.lossless(harness, config, messages, 42).run().delivered();
        }
        try (DataplaneHarness harness = new DataplaneHarness(1, false, 1L << 30, 0.05, 7))
        {
            harness.install(config);
            final RingSimulation lossy = RingSimulation.lossless(harness, config, messages, 42).run();
            assertThat(harness.counter(DataplaneCounter.DROP_INJECTED)).isPositive();
            for (int rank = 0; rank < 4; rank++)
            {
                assertThat(lossy.delivered().get(rank)).as("connection %d", rank)
                    .usingElementComparator(java.util.Arrays::compare).isEqualTo(lossless.get(rank));
            }
            RingAggregationTest.assertNoLeaks(harness, config, messages);
        }
    }
}
