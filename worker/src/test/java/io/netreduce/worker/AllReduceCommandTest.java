package io.netreduce.worker;

import org.junit.jupiter.api.Test;
import picocli.CommandLine;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import static org.assertj.core.api.Assertions.assertThat;

class AllReduceCommandTest
{
    @Test
    void shouldRefuseAnEndpointNiceValueOutOfRangeBeforeOpeningAPort()
    {
        final PrintStream stderr = System.err;
        final ByteArrayOutputStream err = new ByteArrayOutputStream();
        final int exit;
        try
        {
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            exit = new CommandLine(new AllReduceCommand()).execute(
                "--rank", "0", "--world", "2", "--dev", "no-such-device", "--endpoint-nice", "20");
        }
        finally
        {
            System.setErr(stderr);
        }

        assertThat(exit).isEqualTo(2);
        assertThat(err.toString(StandardCharsets.UTF_8)).contains("nice must be -20..19: 20");
    }
}
