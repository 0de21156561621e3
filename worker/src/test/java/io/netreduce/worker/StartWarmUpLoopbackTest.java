package io.netreduce.worker;

import io.netreduce.host.allreduce.RingWarmUp;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.PacketPort;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The sidecar agent's start warm-up as {@code worker agent} runs it: a ring of {@value RingWarmUp#PORT_RANKS} ranks
 * over AF_PACKET ports of the loopback interface with a session's port settings. Needs root (packet sockets);
 * skipped otherwise.
 */
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class StartWarmUpLoopbackTest
{
    @Test
    void shouldRunThreeRanksOnLoopbackWithOneRoundMarkedCeAndNothingResent()
    {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root for packet sockets");
        final RcConfig rc = new RcConfig();
        final PacketPort[] ports = new PacketPort[RingWarmUp.PORT_RANKS];
        for (int r = 0; r < ports.length; r++)
        {
            ports[r] = AfPacketPort.open(ServeCommand.portConfiguration("lo", true, rc));
        }
        final long frames = 131_072;
        final RingWarmUp.Report report;
        try (RingWarmUp warmUp = RingWarmUp.onPorts(ports, rc, 16, 16, ElementType.FP32, 32, frames))
        {
            report = warmUp.run(frames, 60_000_000_000L);
        }

        assertThat(report.failure()).as(report.toString()).isNull();
        assertThat(report.frames()).as(report.toString()).isGreaterThanOrEqualTo(frames);
        // the four rounds and the short marked one, whose results the ranks' windows saw marked
        assertThat(report.rounds()).as(report.toString()).isGreaterThanOrEqualTo(RingWarmUp.ROUNDS);
        assertThat(report.marked()).as(report.toString()).isPositive();
        // every call exact and clean: a tag per rank told results from messages, nothing lost or resent (the round
        // ACKed in parts runs with a timeout no descheduling reaches)
        assertThat(report.calls()).as(report.toString()).isPositive();
        assertThat(report.resent()).as(report.toString()).isZero();
        assertThat(report.dropped()).as(report.toString()).isZero();
    }

    @Test
    void shouldRefuseOtherThanThreePorts()
    {
        final PacketPort[] two = {new MemoryPort("a"), new MemoryPort("b")};

        assertThatThrownBy(() -> RingWarmUp.onPorts(two, new RcConfig(), 16, 16, ElementType.FP32, 32, 1_000))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("3 ports");
    }
}
