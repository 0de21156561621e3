package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.ScratchNamespace;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class PacketPathWarmUpTest
{
    @Test
    void shouldSumEveryFrameOfEveryRoundAndSendEveryResultWithoutADrop()
    {
        // one round per element type, and one more: every type's ring installed, summed and removed
        final int rounds = ElementType.values().length + 1;
        final PacketPathWarmUp.Report report = PacketPathWarmUp.run((long)rounds * PacketPathWarmUp.FRAMES_PER_ROUND);

        assertThat(report.frames()).isEqualTo((long)rounds * PacketPathWarmUp.FRAMES_PER_ROUND);
        assertThat(report.expected()).isEqualTo((long)rounds * PacketPathWarmUp.MESSAGES * PacketPathWarmUp.MSG_LEN);
        assertThat(report.aggregations()).isEqualTo(report.expected());
        assertThat(report.results()).isEqualTo(report.frames());
        assertThat(report.passOn()).isEqualTo((long)rounds * PacketPathWarmUp.PASS_ON_PER_ROUND);
        assertThat(report.forwarded()).as("every ACK and TCP segment passed on").isEqualTo(report.passOn());
        assertThat(report.completed()).as("those that came with their checksum left to finish, completed")
            .isPositive().isLessThan(report.forwarded());
        assertThat(report.drops()).isZero();
        assertThat(report.clean()).isTrue();
        assertThat(report.port()).isEqualTo(PacketPathWarmUp.IN_MEMORY);
        // the marked rounds' results and those of a backed-up port went out marked, the others not
        assertThat(report.marked()).isPositive().isLessThan(report.results());
    }

    /**
     * The daemon's warm-up goes on, pass after pass, while the JIT settles: every pass's frames summed as the
     * others', and it stops once a pass leaves the compilers nearly idle (within the passes allowed).
     */
    @Test
    void shouldRunWholePassesAfterItsFramesUntilTheJitSettles()
    {
        final int rounds = ElementType.values().length + 1;
        final PacketPathWarmUp.Report report = PacketPathWarmUp.run((long)rounds * PacketPathWarmUp.FRAMES_PER_ROUND,
            20_000_000_000L, null, PacketPathWarmUp.DEFAULT_SETTLE_PASSES);

        assertThat(report.passes()).isBetween(1, PacketPathWarmUp.DEFAULT_SETTLE_PASSES);
        assertThat(report.frames()).isEqualTo((rounds + (long)report.passes() * PacketPathWarmUp.SETTLE_ROUNDS) *
            PacketPathWarmUp.FRAMES_PER_ROUND);
        assertThat(report.aggregations()).isEqualTo(report.expected());
        assertThat(report.results()).isEqualTo(report.frames());
        assertThat(report.clean()).isTrue();
        assertThat(PacketPathWarmUp.run(PacketPathWarmUp.FRAMES_PER_ROUND).passes()).as("none unless asked").isZero();
    }

    @Test
    void shouldSeeTheCompilerThreadsWorkAndGoQuiet()
    {
        final long ticks = CompilerActivity.cpuTicks();
        assertThat(ticks).as("the C1 and C2 threads' CPU time, from /proc").isNotNegative();
        final long quiet = CompilerActivity.awaitQuiet(50_000_000L, System.nanoTime() + 20_000_000_000L);
        assertThat(quiet).as("went quiet, at their time so far").isGreaterThanOrEqualTo(ticks);
        assertThat(CompilerActivity.cpuTicks()).isGreaterThanOrEqualTo(quiet);
        assertThat(CompilerActivity.awaitQuiet(50_000_000L, System.nanoTime())).as("no time left to wait")
            .isEqualTo(-1);
    }

    @Test
    void shouldTakeItsFramesThroughAnAfPacketPortOnTheLoopbackInterfaceWithTheServingPortsSettings()
    {
        final int rounds = ElementType.values().length + 1;
        final long before = loopbackFrames();
        final PacketPathWarmUp.Report report = PacketPathWarmUp.run((long)rounds * PacketPathWarmUp.FRAMES_PER_ROUND,
            PacketPathWarmUp.DEFAULT_MAX_NANOS,
            AfPacketConfiguration.defaults("eth0").withSegmentationOffload(true).withRxForWireFrames());

        assertThat(report.port()).isEqualTo("lo");
        assertThat(report.frames()).isEqualTo((long)rounds * PacketPathWarmUp.FRAMES_PER_ROUND);
        assertThat(report.aggregations()).isEqualTo(report.expected());
        // its own results came back in on lo and were not taken for retransmissions: exactly one result per frame
        assertThat(report.results()).isEqualTo(report.frames());
        assertThat(report.forwarded()).isEqualTo(report.passOn());
        assertThat(report.completed()).as("the kernel flagged the feeder's partial checksums; the path completed them")
            .isPositive().isLessThan(report.forwarded());
        assertThat(report.drops()).isZero();
        assertThat(report.marked()).as("the marked rounds and the full receive ring").isPositive()
            .isLessThan(report.results());
        assertThat(report.clean()).isTrue();
        assertThat(loopbackFrames() - before).as("the frames really crossed lo")
            .isGreaterThanOrEqualTo(report.frames() + report.passOn());
    }

    @Test
    void shouldWarmUpInMemoryAndSayWhyWhereTheLoopbackInterfaceIsDown()
    {
        try (ScratchNamespace namespace = new ScratchNamespace("warmup"))
        {
            final PacketPathWarmUp.Report report = namespace.call(() -> PacketPathWarmUp.run(1,
                PacketPathWarmUp.DEFAULT_MAX_NANOS, AfPacketConfiguration.defaults("eth0")));

            assertThat(report.port()).startsWith(PacketPathWarmUp.IN_MEMORY).contains("lo: ").contains("up?");
            assertThat(report.clean()).isTrue();
        }
    }

    /**
     * @return packets the loopback interface has received, from its statistics in sysfs.
     */
    private static long loopbackFrames()
    {
        try
        {
            return Long.parseLong(Files.readString(Path.of("/sys/class/net/lo/statistics/rx_packets")).trim());
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    @Test
    void shouldTakeWholeRoundsAndNothingWhenAskedForNothing()
    {
        assertThat(PacketPathWarmUp.run(1).frames()).isEqualTo(PacketPathWarmUp.FRAMES_PER_ROUND);
        final PacketPathWarmUp.Report none = PacketPathWarmUp.run(0);
        assertThat(none.frames()).isZero();
        assertThat(none.clean()).isTrue();
    }

    @Test
    void shouldStopAfterItsTimeEvenWithFramesLeft()
    {
        final PacketPathWarmUp.Report report = PacketPathWarmUp.run(Long.MAX_VALUE, 1);
        assertThat(report.frames()).as("the first round always runs").isEqualTo(PacketPathWarmUp.FRAMES_PER_ROUND);
        assertThat(report.clean()).isTrue();
    }

    @Test
    void shouldWarmUpAtStartThroughAPrivateAgentLeavingTheServingAgentsCountersAndPortUntouched()
    {
        final MemoryPort port = new MemoryPort("serving");
        final DataplaneAgent agent = new DataplaneAgent(new DataplaneContext().ports(List.of(port))
            .warmUpFrames(PacketPathWarmUp.FRAMES_PER_ROUND));
        assertThat(agent.warmUp()).isNull();
        agent.onStart();
        try
        {
            assertThat(agent.ready()).isDone();
            // its frames, then the passes while the JIT settled
            assertThat(agent.warmUp().frames()).isEqualTo(PacketPathWarmUp.FRAMES_PER_ROUND *
                (1L + (long)agent.warmUp().passes() * PacketPathWarmUp.SETTLE_ROUNDS));
            assertThat(agent.warmUp().clean()).isTrue();
            for (final DataplaneCounter counter : DataplaneCounter.values())
            {
                assertThat(agent.counters().get(counter)).as(counter.name()).isZero();
            }
            assertThat(port.counters().txFrames()).isZero();
            assertThat(port.counters().rxFrames()).isZero();
        }
        finally
        {
            agent.onClose();
        }
    }

    @Test
    void shouldWarmUpOnlyTheFirstLane()
    {
        final DataplaneContext context = new DataplaneContext().warmUpFrames(1000);
        assertThat(context.forLane(0, List.of(new MemoryPort("a"))).warmUpFrames()).isEqualTo(1000);
        assertThat(context.forLane(1, List.of(new MemoryPort("b"))).warmUpFrames()).isZero();
        assertThat(new DataplaneContext().warmUpFrames()).as("none unless asked").isZero();
    }
}
