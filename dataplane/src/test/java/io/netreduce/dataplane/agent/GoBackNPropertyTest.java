package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.ElementType;
import io.netreduce.dataplane.ring.RingConfig;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.RingSimulation;
import io.netreduce.dataplane.support.Rings;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.DoubleRange;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Under any arrival order, duplication, loss of gradient packets (first packets included) and loss of result
 * packets, with RC go-back-N retransmission, every connection delivers exactly the bytes of the lossless run
 * and no aggregator is left behind.
 */
class GoBackNPropertyTest
{
    @Property(tries = 40)
    void shouldDeliverTheLosslessBytesWhateverIsLostDuplicatedOrReordered(
        @ForAll @IntRange(min = 2, max = 4) final int ranks,
        @ForAll @IntRange(min = 0, max = 2) final int windowLog,
        @ForAll @IntRange(min = 1, max = 5) final int msgLen,
        @ForAll @IntRange(min = 1, max = 10) final int messages,
        @ForAll final ElementType type,
        @ForAll @LongRange(min = 0, max = 1_000_000) final long seed,
        @ForAll @DoubleRange(min = 0, max = 0.2) final double dropIn,
        @ForAll @DoubleRange(min = 0, max = 0.2) final double duplicate,
        @ForAll @DoubleRange(min = 0, max = 0.2) final double dropOut,
        @ForAll @DoubleRange(min = 0, max = 0.02) final double spuriousTimeout)
    {
        final RingConfig config = Rings.ring(3, ranks, type, 1 << windowLog, msgLen, 64);
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
}
