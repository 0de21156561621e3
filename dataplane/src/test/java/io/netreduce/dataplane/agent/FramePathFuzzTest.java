package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.RingSimulation;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.fuzz.Mutator;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.protocol.testing.SeededCases;
import io.netreduce.protocol.wire.TestPcap;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Fuzzing the whole frame path on a memory port: mutated frames from a corpus of the project's soft-RoCE capture
 * and of valid ring traffic (first, middle and last packets of several ranks), fed to a dataplane with the ring
 * installed. Every frame must be accounted for (passed through, dropped under a reason, or aggregated), nothing may
 * throw, and afterwards the ring must still deliver exact sums to the members whatever the fuzz left behind.
 * The test command runs a short fuzz; {@code scripts/fuzz.sh} a long one ({@code -Dnetreduce.fuzz.iterations}).
 */
class FramePathFuzzTest
{
    private static final long ABANDONED_RUN_NS = 50_000_000L;

    @Test
    void shouldAccountForEveryMutatedFrameAndStillSumExactlyAfterwards() throws Exception
    {
        final RingDefinition config = Rings.ring(1, 3, ElementType.FP32, 2, 3, 256);
        final List<byte[]> corpus = corpus(config);
        final int iterations = Mutator.iterations(3000);
        SeededCases.run("frame path fuzz", 1, (random, index) -> fuzz(config, corpus, random, iterations));
    }

    /**
     * Inputs the fuzz found (case seeds): a member locked out after a sum completed with a mutated source MAC
     * (the Ethernet header is outside the ICRC), a run left in flight that refused the next job for ever, and a
     * run left with partial sums that a new job's rank joined (its duplicates kept the run in progress).
     */
    @Test
    void shouldStillSumExactlyAfterTheInputsThatOnceLockedTheMembersOut() throws Exception
    {
        final RingDefinition config = Rings.ring(1, 3, ElementType.FP32, 2, 3, 256);
        final List<byte[]> corpus = corpus(config);
        for (final long seed : new long[] { 135479804053077034L, 2544604821497375059L, 1151809743479343782L,
            -4587536007195466074L, -1682524017590571068L, -6810655045036370938L })
        {
            fuzz(config, corpus, new java.util.SplittableRandom(seed), 3000);
        }
    }

    private static List<byte[]> corpus(final RingDefinition config) throws java.io.IOException
    {
        final List<byte[]> corpus = new ArrayList<>(TestPcap.frames(TestPcap.RXE_CAPTURE));
        final Random data = new Random(1);
        for (int r = 0; r < 3; r++)
        {
            final RingWorker worker = RingWorker.of(config, r, 1000 * r + 7);
            for (int m = 0; m < 3; m++)
            {
                corpus.addAll(worker.message(m, Gradients.random(config.elementType(), worker.gradientBytes(), data)));
            }
        }
        return corpus;
    }

    private static void fuzz(final RingDefinition config, final List<byte[]> corpus,
        final java.util.SplittableRandom random, final int iterations) throws Exception
    {
        {
            // Replayed and mutated member frames can leave a run with messages in flight, as a job killed mid-call
            // does; a new job gets in once that run has made no progress for the abandoned-run time (short here).
            try (DataplaneHarness harness = new DataplaneHarness(1, false, 1L << 30, 0.0, 0, ABANDONED_RUN_NS))
            {
                harness.install(config);
                int deliverable = 0;
                for (int i = 0; i < iterations; i++)
                {
                    final byte[] frame = Mutator.mutate(corpus, random);
                    // A port hands over no empty frame and none longer than its largest (as a NIC would not).
                    if (frame.length > 0 && frame.length <= MemoryPort.DEFAULT_MAX_FRAME_LENGTH)
                    {
                        deliverable++;
                    }
                    harness.process(frame);
                }
                final long received = harness.counter(DataplaneCounter.FRAMES_RECEIVED);
                long drops = 0;
                for (final DataplaneCounter counter : DataplaneCounter.values())
                {
                    if (counter.isDrop())
                    {
                        drops += harness.counter(counter);
                    }
                }
                assertThat(received).isEqualTo(deliverable);
                assertThat(harness.counter(DataplaneCounter.PASS_THROUGH) + drops +
                    harness.counter(DataplaneCounter.RING_PACKETS))
                    .as("every frame passed through, dropped with a reason, or aggregated").isEqualTo(received);

                // Whatever the fuzz left in the tables, the members' next job (new QPs) sums exactly.
                Thread.sleep(2 * ABANDONED_RUN_NS / 1_000_000);
                final RingSimulation after;
                try
                {
                    after = RingSimulation.lossless(harness, config, 6, random.nextLong()).run();
                }
                catch (final IllegalStateException stuck)
                {
                    final java.util.Map<String, Long> nonZero = new java.util.TreeMap<>();
                    harness.proxy().counters().forEach((name, value) ->
                    {
                        if (value != 0)
                        {
                            nonZero.put(name, value);
                        }
                    });
                    throw new AssertionError("the members' next job did not get through; counters " + nonZero, stuck);
                }
                for (int rank = 0; rank < 3; rank++)
                {
                    for (int m = 0; m < 6; m++)
                    {
                        assertThat(after.deliveredMessage(rank, m)).isEqualTo(after.expectedMessage(rank, m));
                    }
                }
            }
        }
    }
}
