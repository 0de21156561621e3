package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.support.Gradients;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A client that opens new queue pairs for every call (the standalone pyverbs client does) leaves a CLT entry per
 * rank per call; the entries its ranks have replaced go once they have been idle for the foreign idle time, and
 * the current ones stay and keep working.
 */
class StaleConnectionExpiryTest
{
    private static final long IDLE_NS = 50_000_000L;

    @Test
    void shouldExpireConnectionsTheirRankReplacedOnceIdleAndKeepTheCurrentOnes() throws InterruptedException
    {
        final RingDefinition config = Rings.ring(2, 2, ElementType.INT32, 2, 2, 64);
        try (DataplaneHarness harness = new DataplaneHarness(
            context -> context.foreignIdleNs(IDLE_NS).cltEntries(DataplaneContext.SWEEP_SLOTS)))
        {
            harness.install(config);
            final Random data = new Random(5);
            final byte[] g = Gradients.random(config.elementType(), RingWorker.of(config, 0, 0).gradientBytes(), data);
            RingWorker[] current = null;
            for (int call = 0; call < 6; call++)
            {
                // Each call on new connections of both ranks: another destination QP and first PSN.
                current = new RingWorker[] {
                    new RingWorker(config, 0, 0x400 + call, 1000 * call, RingWorker.macOf(0), RingWorker.macOf(1)),
                    new RingWorker(config, 1, 0x500 + call, 2000 * call, RingWorker.macOf(1), RingWorker.macOf(0))};
                final List<byte[]> out = new ArrayList<>();
                for (final RingWorker worker : current)
                {
                    worker.message(0, g).forEach(frame -> out.addAll(harness.process(frame)));
                }
                assertThat(out).as("call %d: both ranks' results", call).hasSize(2 * config.msgLen());
            }
            // An entry per rank per call (a sweep may already have taken early ones on a slow machine).
            assertThat(harness.agent().tables().clt().size() + harness.counter(DataplaneCounter.CLT_STALE_EXPIRED))
                .isEqualTo(12);

            Thread.sleep(IDLE_NS / 1_000_000 + 10);
            // A sweep every SWEEP_INTERVAL_NS looks at SWEEP_SLOTS slots: a few cover the (small) table.
            for (int sweep = 0; sweep < 10 && harness.counter(DataplaneCounter.CLT_STALE_EXPIRED) < 10; sweep++)
            {
                Thread.sleep(DataplaneContext.SWEEP_INTERVAL_NS / 1_000_000 + 10);
                harness.runUntilIdle();
            }

            assertThat(harness.counter(DataplaneCounter.CLT_STALE_EXPIRED)).isEqualTo(10);
            assertThat(harness.agent().tables().clt().size()).as("the current connections").isEqualTo(2);
            final List<byte[]> out = new ArrayList<>();
            for (final RingWorker worker : current)
            {
                worker.message(1, g).forEach(frame -> out.addAll(harness.process(frame)));
            }
            assertThat(out).as("the next message on the current connections").hasSize(2 * config.msgLen());
        }
    }
}
