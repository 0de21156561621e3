package io.netreduce.worker;

import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.MemoryPort;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTrue;

class AllReduceReportTest
{
    @Test
    void shouldReportTheGoodputOfACallOf256MiBOrMoreWithoutOverflow()
    {
        final ByteArrayOutputStream printed = new ByteArrayOutputStream();
        final AllReduceOptions options = new AllReduceOptions();
        options.rank = 2;
        final int bytes = 512 << 20; // bytes * 8 is past Integer.MAX_VALUE
        final AllReduceReport report = new AllReduceReport(
            new PrintStream(printed, true, StandardCharsets.UTF_8), options, ElementType.FP32, true, bytes);

        report.checked(0, 1.0, null);

        final String line = printed.toString(StandardCharsets.UTF_8);
        assertTrue(line.contains(
            "iteration 0 rank 2 netreduce fp32 536870912 bytes: 1000.000 ms, goodput 4.295 Gbit/s, result: exact"), line);
    }

    /**
     * Each call's CPU is reported twice in the JSON the benches read: the process's (in the kernel's ticks, every
     * thread) and the thread's that drove the endpoint (to the nanosecond), call by call in the same order.
     */
    @Test
    void shouldReportEachCallsProcessAndEndpointThreadCpuInTheJson()
    {
        final ByteArrayOutputStream printed = new ByteArrayOutputStream();
        final AllReduceOptions options = new AllReduceOptions();
        options.iterations = 2;
        options.json = true;
        final AllReduceReport report = new AllReduceReport(
            new PrintStream(printed, true, StandardCharsets.UTF_8), options, ElementType.INT32, "switchml",
            "exact", 4096);
        report.called(1_000L, 0.010, 10.0, 7.25);
        report.checked(0, 0.010, null);
        report.called(2_000L, 0.012, 20.0, 8.5);
        report.checked(1, 0.012, null);

        try (MemoryPort port = new MemoryPort("m0"))
        {
            assertThat(report.summariseSwitchMl(port, 0, 0, 0, 0, 0, false)).isZero();
        }
        final String json = printed.toString(StandardCharsets.UTF_8).lines().filter(l -> l.startsWith("{"))
            .findFirst().orElseThrow();
        assertThat(json).contains("\"cpu_ms\":[10.000,20.000]").contains("\"endpoint_cpu_ms\":[7.250,8.500]");
    }
}
