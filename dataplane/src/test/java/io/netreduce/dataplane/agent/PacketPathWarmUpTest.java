package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.MemoryPort;
import org.junit.jupiter.api.Test;

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
        assertThat(report.drops()).isZero();
        assertThat(report.clean()).isTrue();
        // the marked rounds' results and those of a backed-up port went out marked, the others not
        assertThat(report.marked()).isPositive().isLessThan(report.results());
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
            assertThat(agent.warmUp().frames()).isEqualTo(PacketPathWarmUp.FRAMES_PER_ROUND);
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
