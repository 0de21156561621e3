package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.HierarchySimulation;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.testing.SeededCases;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Multi-rack aggregation (paper 000, §3.3) on memory ports: R leaf appliances and a spine, the leaves' partial sums
 * going up on the racks' leaving cross-rack connections, the spine's result coming down and translated by each
 * leaf onto its rack. Every connection must deliver, bit for bit, the sum the hierarchy defines: each rack's ranks
 * in rank order, rounded to the element type, then the racks' partial sums in rack order.
 */
class HierarchyAggregationTest
{
    private static final ElementType[] TYPES = ElementType.values();

    @ParameterizedTest(name = "W={0} racks ending at {1} {2}")
    @CsvSource({
        "4, 1;3, FP32",
        "4, 1;3, FP16",
        "8, 3;7, FP32",
        "8, 3;7, FP16",
        "8, 3;7, BF16",
        "8, 3;7, INT32",
        "7, 0;4;6, FP32",
    })
    void shouldDeliverTheHierarchicalSumOnEveryConnectionWithOnePacketPerPositionOnTheSpineLinks(
        final int world, final String ends, final ElementType type)
    {
        final List<Integer> rackEnds = rackEnds(ends);
        final RingDefinition config = Rings.ring(5, world, type, 4, 3, 256);
        final int messages = 20;
        final HierarchySimulation run = HierarchySimulation.lossless(config, rackEnds, messages, 11).run();
        try
        {
            assertExact(run, config, messages);
            for (int k = 0; k < run.racks(); k++)
            {
                // The point of the hierarchy: one packet per position each way on a leaf's spine links, whatever
                // the rack's size.
                assertThat(run.upFrames(k)).as("frames up from leaf %d", k).isEqualTo((long)messages * 3);
                assertThat(run.downFrames(k)).as("frames down to leaf %d", k).isEqualTo((long)messages * 3);
                assertThat(run.leaf(k).counter(DataplaneCounter.UP_PACKETS)).isEqualTo((long)messages * 3);
                assertThat(run.leaf(k).counter(DataplaneCounter.DOWN_RESULTS)).isEqualTo((long)messages * 3);
                assertThat(run.leaf(k).counter(DataplaneCounter.DOWN_CONNECTIONS)).isEqualTo(1);
                assertThat(run.leaf(k).counter(DataplaneCounter.UP_REPEATED)).isZero();
            }
            assertThat(run.spine().counter(DataplaneCounter.RESULT_PACKETS))
                .isEqualTo((long)messages * 3 * run.racks());
        }
        finally
        {
            run.close();
        }
    }

    @Test
    void shouldComputeAReferenceThatDiffersFromTheFlatRankOrderSumForFp32()
    {
        // fp32 addition is not associative: the hierarchy's order ((x0+..+x3) + (x4+..+x7)) is not the flat
        // (((x0+x1)+x2)+...). The tests compare against the hierarchy's order; this checks that choice matters.
        final RingDefinition config = Rings.ring(5, 8, ElementType.FP32, 4, 3, 256);
        final HierarchySimulation run = HierarchySimulation.lossless(config, List.of(3, 7), 4, 3).run();
        try
        {
            boolean differs = false;
            for (int m = 0; m < 4; m++)
            {
                differs |= !Arrays.equals(run.hierarchicalSum(m), run.flatSum(m));
            }
            assertThat(differs).isTrue();
            assertExact(run, config, 4);
        }
        finally
        {
            run.close();
        }
    }

    @Test
    void shouldSendThePartialUpAgainWhenAWorkerRetransmitsAfterItWasLostOnTheWayToTheSpine()
    {
        final RingDefinition config = Rings.ring(5, 4, ElementType.FP32, 2, 2, 128);
        final int messages = 16;
        final HierarchySimulation run = new HierarchySimulation(config, List.of(1, 3), messages, 5, 6,
            0, 0, 0.3, 0, 0, 0).run();
        try
        {
            assertExact(run, config, messages);
            assertThat(run.leaf(0).counter(DataplaneCounter.UP_REPEATED) +
                run.leaf(1).counter(DataplaneCounter.UP_REPEATED)).isPositive();
        }
        finally
        {
            run.close();
        }
    }

    @Test
    void shouldAnswerARepeatedPartialFromTheSpinesStoredResultWhenTheResultWasLostOnTheWayDown()
    {
        final RingDefinition config = Rings.ring(5, 4, ElementType.FP16, 2, 2, 128);
        final int messages = 16;
        final HierarchySimulation run = new HierarchySimulation(config, List.of(1, 3), messages, 8, 9,
            0, 0, 0, 0.3, 0, 0).run();
        try
        {
            assertExact(run, config, messages);
            assertThat(run.spine().counter(DataplaneCounter.DUPLICATES_ANSWERED)).isPositive();
            assertThat(run.leaf(0).counter(DataplaneCounter.UP_REPEATED) +
                run.leaf(1).counter(DataplaneCounter.UP_REPEATED)).isPositive();
        }
        finally
        {
            run.close();
        }
    }

    @Test
    void shouldDeliverTheHierarchicalSumWhateverIsLostDuplicatedOrReorderedAtAnyTier()
    {
        SeededCases.run("multi-rack go-back-N", 30, (random, index) -> checkLossyCase(random, index));
    }

    private static void checkLossyCase(final SplittableRandom random, final int index)
    {
        // W = 4 (2 x 2) and W = 8 (2 x 4) always among the cases, then random splits (racks of one rank included).
        final List<Integer> rackEnds;
        final int world;
        if (index % 3 == 0)
        {
            world = 4;
            rackEnds = List.of(1, 3);
        }
        else if (index % 3 == 1)
        {
            world = 8;
            rackEnds = List.of(3, 7);
        }
        else
        {
            world = random.nextInt(3, 9);
            final int racks = random.nextInt(2, Math.min(world, 4) + 1);
            final List<Integer> cuts = new ArrayList<>();
            while (cuts.size() < racks - 1)
            {
                final int cut = random.nextInt(0, world - 1);
                if (!cuts.contains(cut))
                {
                    cuts.add(cut);
                }
            }
            cuts.sort(null);
            cuts.add(world - 1);
            rackEnds = cuts;
        }
        final ElementType type = index < 6 ? (index % 2 == 0 ? ElementType.FP32 : ElementType.FP16) :
            TYPES[random.nextInt(TYPES.length)];
        final int window = 1 << random.nextInt(3);
        final int msgLen = random.nextInt(1, 5);
        final int messages = random.nextInt(1, 13);
        // Loss at one tier at a time, or at all of them.
        final int tier = random.nextInt(5);
        final double loss = random.nextDouble(0.05, 0.25);
        final double dropIn = tier == 0 || tier == 4 ? loss : 0;
        final double dropUp = tier == 1 || tier == 4 ? loss : 0;
        final double dropDown = tier == 2 || tier == 4 ? loss : 0;
        final double dropOut = tier == 3 || tier == 4 ? loss : 0;
        final double duplicate = random.nextDouble(0.1);
        final RingDefinition config = Rings.ring(7, world, type, window, msgLen, 64);
        final HierarchySimulation run = new HierarchySimulation(config, rackEnds, messages, random.nextLong(),
            random.nextLong(), dropIn, duplicate, dropUp, dropDown, dropOut, random.nextDouble(0.02)).run();
        try
        {
            assertExact(run, config, messages);
        }
        finally
        {
            run.close();
        }
    }

    private static void assertExact(final HierarchySimulation run, final RingDefinition config, final int messages)
    {
        for (int rank = 0; rank < config.worldSize(); rank++)
        {
            for (int m = 0; m < messages; m++)
            {
                assertThat(run.deliveredMessage(rank, m)).as("connection %d message %d", rank, m)
                    .isEqualTo(run.expectedMessage(rank, m));
            }
        }
        assertThat(run.badIcrcResults()).isZero();
        assertThat(run.misrouted()).isZero();
        final List<DataplaneHarness> appliances = new ArrayList<>();
        for (int k = 0; k < run.racks(); k++)
        {
            appliances.add(run.leaf(k));
        }
        appliances.add(run.spine());
        for (final DataplaneHarness appliance : appliances)
        {
            assertThat(appliance.counter(DataplaneCounter.DROP_BAD_ICRC)).isZero();
            assertThat(appliance.counter(DataplaneCounter.DROP_AGGREGATOR_BUSY)).isZero();
            assertThat(appliance.counter(DataplaneCounter.DROP_DOWN_MISMATCH)).isZero();
            assertThat(appliance.counter(DataplaneCounter.DROP_SPOOFED)).isZero();
            assertThat(appliance.counter(DataplaneCounter.DROP_BAD_RANK)).isZero();
            RingAggregationTest.assertNoLeaks(appliance, config, messages);
        }
    }

    static List<Integer> rackEnds(final String ends)
    {
        final List<Integer> list = new ArrayList<>();
        for (final String end : ends.split(";"))
        {
            list.add(Integer.parseInt(end.trim()));
        }
        return list;
    }
}
