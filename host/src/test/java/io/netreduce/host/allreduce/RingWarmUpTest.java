package io.netreduce.host.allreduce;

import io.netreduce.host.rc.RcConfig;
import io.netreduce.protocol.element.ElementType;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class RingWarmUpTest
{
    @Test
    void shouldRunSlotModeCallsOverRcUntilItHasSentTheFramesAskedFor()
    {
        final RingWarmUp.Report report = RingWarmUp.runOnce(new RcConfig().pmtu(4096), 8, 4, ElementType.FP32, 0,
            4_000);

        assertThat(report.failure()).as(report.toString()).isNull();
        assertThat(report.frames()).isGreaterThanOrEqualTo(4_000);
        // every call is 2 x window messages of MsgLen packets per rank, and ACKs besides
        assertThat(report.calls()).isPositive().isLessThanOrEqualTo(4_000 / (2 * 16 * 4));
    }

    @Test
    void shouldRunPlacedCallsToo()
    {
        final RingWarmUp.Report report = RingWarmUp.runOnce(new RcConfig().pmtu(1024), 4, 2, ElementType.BF16, 5,
            2_000);

        assertThat(report.failure()).as(report.toString()).isNull();
        assertThat(report.calls()).isGreaterThan(10);
    }

    @Test
    void shouldRunNothingForZeroFrames()
    {
        assertThat(RingWarmUp.runOnce(new RcConfig(), 8, 4, ElementType.FP32, 0, 0)).isNull();
    }

    @Test
    void shouldSpreadItsPacketsOverRoundsOnNewEndpointsWithFramesThatAreNotRoceAmongThem()
    {
        final RingWarmUp.Report report = RingWarmUp.runOnce(new RcConfig().pmtu(4096), 8, 4, ElementType.FP32, 0,
            16_384);

        assertThat(report.failure()).as(report.toString()).isNull();
        assertThat(report.rounds()).as(report.toString()).isEqualTo(RingWarmUp.ROUNDS);
        // the ARP and TCP frames reached the endpoints, which counted them and went on
        assertThat(report.strays()).as(report.toString()).isPositive();
        assertThat(report.calls()).isPositive();
        // the round whose endpoints take a few frames a turn loses nothing either: a clean call's path is compiled
        assertThat(report.resent()).as(report.toString()).isZero();
        assertThat(report.dropped()).as(report.toString()).isZero();
        // in memory no round is marked
        assertThat(report.marked()).as(report.toString()).isZero();
    }
}
