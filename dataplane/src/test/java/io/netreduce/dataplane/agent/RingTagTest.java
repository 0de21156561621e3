package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.netreduce.ForeignTagEvents;
import io.netreduce.dataplane.clt.IpKey;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.RingSimulation;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.protocol.wire.InaHeader;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The InetTag as a ring setting: a ring aggregates the tag it is configured with, marks results with its result
 * tag (or leaves the request tag when told to), and a client on a ring edge with another tag is passed through
 * and reported once per connection.
 */
class RingTagTest
{
    private static final int ABCD = 0x4142_4344;
    private static final int ABCR = 0x4142_4352;

    @Test
    void shouldAggregateARingWithItsOwnTagAndMarkResultsWithItsResultTag()
    {
        final RingDefinition config = withTags(Rings.ring(3, 3, ElementType.FP32, 2, 4, 256), ABCD, ABCR);
        assertExactRun(config);
    }

    @Test
    void shouldLeaveTheRequestTagOnResultsWhenTheRingDoesNotMarkThem()
    {
        final RingDefinition config = withTags(Rings.ring(4, 2, ElementType.FP16, 4, 3, 512), ABCD, ABCD);
        assertThat(config.marksResults()).isFalse();
        assertExactRun(config);
    }

    @Test
    void shouldPassThroughAndReportOnceAConnectionOnARingEdgeWithAnotherTag()
    {
        final RingDefinition installed = Rings.ring(5, 2, ElementType.FP32, 2, 2, 256);
        final RingDefinition client = withTags(installed, ABCD, ABCD);
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(installed);
            final RingWorker rank0 = RingWorker.of(client, 0, 100);
            final byte[] gradient = Gradients.random(ElementType.FP32, rank0.gradientBytes(), new Random(5));
            final List<byte[]> out = new ArrayList<>();
            for (int m = 0; m < 3; m++)
            {
                for (final byte[] frame : rank0.message(m, gradient))
                {
                    out.addAll(harness.process(frame));
                }
            }
            // Every frame passed through unchanged: no aggregation, no drop.
            assertThat(out).hasSize(3 * 2);
            assertThat(harness.counter(DataplaneCounter.PASS_THROUGH)).isEqualTo(6);
            assertThat(harness.counter(DataplaneCounter.RING_PACKETS)).isZero();
            assertThat(harness.counter(DataplaneCounter.FOREIGN_TAG_ON_RING_EDGE)).isEqualTo(1);

            final List<ForeignTagEvents.Event> events = new ArrayList<>();
            assertThat(harness.proxy().drainForeignTags(events::add)).isEqualTo(1);
            final ForeignTagEvents.Event event = events.getFirst();
            assertThat(event.tag()).isEqualTo(ABCD);
            assertThat(event.ringId()).isEqualTo(5);
            assertThat(IpKey.toAddress(event.connection().srcHigh(), event.connection().srcLow()))
                .isEqualTo(installed.member(0).address());
            assertThat(IpKey.toAddress(event.connection().dstHigh(), event.connection().dstLow()))
                .isEqualTo(installed.member(1).address());
            assertThat(harness.proxy().drainForeignTags(events::add)).as("once per connection").isZero();
        }
    }

    private static void assertExactRun(final RingDefinition config)
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(config);
            final int messages = 2 * config.window() + 1;
            final RingSimulation run = RingSimulation.lossless(harness, config, messages, 17).run();
            for (int rank = 0; rank < config.worldSize(); rank++)
            {
                for (int m = 0; m < messages; m++)
                {
                    final byte[] delivered = run.deliveredMessage(rank, m);
                    assertThat(delivered).as("rank %d message %d", rank, m).isEqualTo(run.expectedMessage(rank, m));
                    assertThat(InaHeader.inetTag(new org.agrona.concurrent.UnsafeBuffer(delivered), 0))
                        .isEqualTo(config.resultTag());
                }
            }
            assertThat(run.badIcrcResults()).as("result ICRCs").isZero();
            assertThat(harness.counter(DataplaneCounter.FOREIGN_TAG_ON_RING_EDGE)).isZero();
        }
    }

    private static RingDefinition withTags(final RingDefinition ring, final int inetTag, final int resultTag)
    {
        return new RingDefinition(ring.ringId(), ring.jobName(), ring.elementType(), ring.window(), ring.msgLen(),
            ring.payloadSize(), ring.members(), inetTag, resultTag);
    }
}
