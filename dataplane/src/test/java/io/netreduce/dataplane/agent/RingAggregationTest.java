package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.RingSimulation;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.protocol.support.ScapyIcrc;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Whole rings through the dataplane on a memory port, results compared bit for bit with a reference sum.
 * <p>
 * Covering set rather than the full cross product (4 sizes x 4 types x 2 lengths x 4 windows would take
 * minutes): every world size (2, 3, 8, 32) appears with both message lengths (1 and 170 packets), every element
 * type with both message lengths, and every window (1, 2, 4, 8); each run sends 2N + 1 messages so the
 * aggregator array wraps and the release path runs.
 */
class RingAggregationTest
{
    private static final List<byte[]> SCAPY_SAMPLE = new ArrayList<>();

    @ParameterizedTest(name = "W={0} {1} MsgLen={2} N={3} payload={4}")
    @CsvSource({
        "2,  FP32,  1,   1, 1024",
        "2,  INT32, 170, 8, 64",
        "2,  FP16,  1,   2, 4096",
        "3,  FP16,  170, 2, 128",
        "3,  BF16,  1,   4, 1024",
        "8,  BF16,  170, 1, 256",
        "8,  FP32,  1,   8, 256",
        "8,  FP32,  170, 4, 64",
        "32, INT32, 1,   2, 512",
        "32, FP16,  170, 1, 64",
    })
    void shouldDeliverTheRankOrderSumOnEveryConnection(
        final int ranks, final ElementType type, final int msgLen, final int window, final int payload)
    {
        final RingDefinition config = Rings.ring(7, ranks, type, window, msgLen, payload);
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            final int messages = 2 * window + 1;
            final RingSimulation run = RingSimulation.lossless(harness, config, messages, ranks * 31L + msgLen).run();

            for (int rank = 0; rank < ranks; rank++)
            {
                for (int m = 0; m < messages; m++)
                {
                    assertThat(run.deliveredMessage(rank, m))
                        .as("rank %d message %d", rank, m)
                        .isEqualTo(run.expectedMessage(rank, m));
                }
            }
            assertThat(run.badIcrcResults()).isZero();
            assertThat(run.results()).hasSize(messages * msgLen * ranks);
            assertThat(harness.counter(DataplaneCounter.AGGREGATIONS_COMPLETED)).isEqualTo((long)messages * msgLen);
            assertNoLeaks(harness, config, messages);
            synchronized (SCAPY_SAMPLE)
            {
                SCAPY_SAMPLE.addAll(run.results().subList(0, Math.min(200, run.results().size())));
            }
        }
    }

    @Test
    void shouldAggregateIpv6Rings()
    {
        final RingDefinition config = Rings.ring(9, 3, ElementType.FP32, 2, 4, 256, true);
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            final RingSimulation run = RingSimulation.lossless(harness, config, 5, 99).run();
            for (int rank = 0; rank < 3; rank++)
            {
                for (int m = 0; m < 5; m++)
                {
                    assertThat(run.deliveredMessage(rank, m)).isEqualTo(run.expectedMessage(rank, m));
                }
            }
            assertThat(run.badIcrcResults()).isZero();
        }
    }

    @AfterAll
    static void resultPacketsShouldVerifyWithScapy() throws Exception
    {
        assumeTrue(!SCAPY_SAMPLE.isEmpty() && ScapyIcrc.available(), "scapy not available");
        final String output = ScapyIcrc.check(SCAPY_SAMPLE);
        assertThat(output).startsWith("checked " + SCAPY_SAMPLE.size() + " mismatches 0").endsWith("exit 0");
    }

    static void assertNoLeaks(final DataplaneHarness harness, final RingDefinition config, final int messages)
    {
        final AggregatorUsage occupancy = harness.await(harness.proxy().occupancy(config.ringId(), 10));
        assertThat(occupancy.incomplete()).as("incomplete aggregators %s", occupancy.oldest()).isZero();
        // The last N messages keep their results for retransmissions; everything older has been released.
        assertThat(occupancy.complete()).isEqualTo(Math.min(config.window(), messages) * config.msgLen());
        assertThat(occupancy.free()).isEqualTo(occupancy.aggregators() - occupancy.complete());
    }
}
