package io.netreduce.worker;

import io.netreduce.host.allreduce.RingWarmUp;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.ScratchNamespace;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * {@code worker allreduce}'s warm-up (and the agent's start warm-up): three ranks on AF_PACKET ports of the loopback
 * interface with a worker's port settings, in slot mode as the command runs its ring. Needs root (packet sockets).
 */
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class LoopbackWarmUpTest
{
    private final ByteArrayOutputStream said = new ByteArrayOutputStream();
    private final PrintStream log = new PrintStream(said, true, StandardCharsets.UTF_8);

    @Test
    void shouldRunTheWorkersRingOnLoopbackPortsAndSayWhatItDid()
    {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root for packet sockets");
        final RcConfig rc = new RcConfig();
        final RingWarmUp.Report report = LoopbackWarmUp.run(ServeCommand.portConfiguration("lo", true, rc), rc, 16,
            16, ElementType.FP32, 0, RingWarmUp.DEFAULT_FRAMES, 60_000_000_000L, "allreduce: rank 0", log);

        assertThat(report).isNotNull();
        assertThat(report.failure()).as(report.toString()).isNull();
        assertThat(report.frames()).as(report.toString()).isGreaterThanOrEqualTo(RingWarmUp.DEFAULT_FRAMES);
        assertThat(report.resent()).as(report.toString()).isZero();
        assertThat(report.dropped()).as(report.toString()).isZero();
        assertThat(said.toString(StandardCharsets.UTF_8)).startsWith("allreduce: rank 0 warm-up on lo: ");
    }

    /**
     * A new network namespace's {@code lo} is down: its packet sockets open but nothing they send arrives. The
     * warm-up must stop within its retries, not its time limit, and say why: the worker then warms up in memory.
     */
    @Test
    void shouldStopSoonAndSayWhyWhereTheLoopbackInterfaceIsDown()
    {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root for network namespaces");
        try (ScratchNamespace namespace = new ScratchNamespace("lowarm"))
        {
            final RcConfig rc = new RcConfig();
            final long startNs = System.nanoTime();
            final RingWarmUp.Report report = namespace.call(() -> LoopbackWarmUp.run(
                ServeCommand.portConfiguration("lo", true, rc), rc, 16, 16, ElementType.FP32, 0,
                RingWarmUp.DEFAULT_FRAMES, 60_000_000_000L, "allreduce: rank 1", log));

            assertThat(report.failure()).as(report.toString()).contains("RETRY_EXCEEDED");
            assertThat(report.calls()).isZero();
            assertThat(said.toString(StandardCharsets.UTF_8)).startsWith("allreduce: rank 1 warm-up on lo: ")
                .contains("stopped: ");
            assertThat(System.nanoTime() - startNs).as("its retries, not its time limit").isLessThan(30_000_000_000L);
        }
    }

    @Test
    void shouldSayWhyAndRunNothingWhereTheInterfaceCannotBeOpened()
    {
        final RcConfig rc = new RcConfig();
        final AfPacketConfiguration nowhere = ServeCommand.portConfiguration("nr-no-such0", true, rc);
        final RingWarmUp.Report report = LoopbackWarmUp.run(nowhere, rc, 16, 16, ElementType.FP32, 0,
            RingWarmUp.DEFAULT_FRAMES, 60_000_000_000L, "allreduce: rank 3", log);

        assertThat(report).as("the command then warms up in memory").isNull();
        assertThat(said.toString(StandardCharsets.UTF_8)).startsWith("allreduce: rank 3 warm-up: not on nr-no-such0 (");
    }
}
