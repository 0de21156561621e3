package io.netreduce.worker;

import io.netreduce.protocol.element.ElementType;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

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
}
