package io.netreduce.host.allreduce;

import io.netreduce.host.rc.RcConfig;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.AfPacketConfiguration;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class RingWarmUpTest
{
    @Test
    void shouldRunSlotModeCallsOverRcUntilItHasSentTheFramesAskedFor()
    {
        final RingWarmUp.Report report = RingWarmUp.runOnce(null, new RcConfig().pmtu(4096), 8, 4, ElementType.FP32, 0,
            4_000);

        assertThat(report.failure()).as(report.toString()).isNull();
        assertThat(report.where()).isEqualTo("memory (asked for)");
        assertThat(report.frames()).isGreaterThanOrEqualTo(4_000);
        // every call is 2 x window messages of MsgLen packets per rank, and ACKs besides
        assertThat(report.calls()).isPositive().isLessThanOrEqualTo(4_000 / (2 * 16 * 4));
    }

    @Test
    void shouldRunPlacedCallsToo()
    {
        final RingWarmUp.Report report = RingWarmUp.runOnce(null, new RcConfig().pmtu(1024), 4, 2, ElementType.BF16, 5,
            2_000);

        assertThat(report.failure()).as(report.toString()).isNull();
        assertThat(report.calls()).isGreaterThan(10);
    }

    @Test
    void shouldRunNothingForZeroFrames()
    {
        assertThat(RingWarmUp.runOnce(null, new RcConfig(), 8, 4, ElementType.FP32, 0, 0)).isNull();
    }

    @Test
    void shouldRunOnAfPacketPortsOfTheLoopbackInterfaceWithTheWorkersPortSettings()
    {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root for AF_PACKET");
        // the settings worker allreduce and serve give their own port, on lo
        final AfPacketConfiguration loopback = AfPacketConfiguration.defaults("lo")
            .withTxRing(8192, 1024)
            .withRxRing(16384, 1024, AfPacketConfiguration.DEFAULT_RX_BLOCK_TIMEOUT_MS)
            .withSegmentationOffload(true);

        final RingWarmUp.Report report = RingWarmUp.runOnce(loopback, new RcConfig().pmtu(4096), 8, 4,
            ElementType.FP32, 0, 4_000);

        assertThat(report.failure()).as(report.toString()).isNull();
        assertThat(report.where()).as(report.toString()).isEqualTo("lo");
        assertThat(report.frames()).isGreaterThanOrEqualTo(4_000);
    }

    @Test
    void shouldFallBackToMemoryPortsSayingWhyWhenTheInterfaceCannotCarryIt()
    {
        final RingWarmUp.Report report = RingWarmUp.runOnce(AfPacketConfiguration.defaults("nr-no-such-if0"),
            new RcConfig().pmtu(4096), 8, 4, ElementType.FP32, 0, 1_000);

        assertThat(report.failure()).as(report.toString()).isNull();
        assertThat(report.where()).startsWith("memory (nr-no-such-if0");
    }
}
