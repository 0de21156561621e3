package io.netreduce.worker;

import io.netreduce.host.rc.RcConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import picocli.CommandLine;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

class AllReduceCommandTest
{
    @ParameterizedTest(name = "{0} {1}")
    @CsvSource(delimiter = '|', textBlock = """
        --endpoint-nice  | 20       | nice must be -20..19: 20
        --ecn-gain       | 1.5      | --ecn-gain must be in (0, 1]: 1.5
        --ecn-min-window | 0        | --ecn-min-window must be at least 1: 0
        --first-qpn      | 16777216 | firstQpn must be in [2, 16777215]: 16777216
        """)
    void shouldRefuseAnOptionOutOfRangeBeforeOpeningAPort(final String option, final String value,
        final String message)
    {
        final Refusal refusal = run("--rank", "0", "--world", "2", "--dev", "no-such-device", option, value);

        assertThat(refusal.exit()).isEqualTo(2);
        assertThat(refusal.stderr()).contains(message);
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
        --protocol switchml --mode ring | allreduce: --protocol switchml aggregates on the appliance; --mode ring does not go with it (leave --mode out)
        --protocol switchml --type fp16 | allreduce: --protocol switchml carries int32 (exact) and fp32 (block fixed point) only, not fp16
        --protocol switchml --type bf16 | allreduce: --protocol switchml carries int32 (exact) and fp32 (block fixed point) only, not bf16
        --protocol rdma                 | allreduce: --protocol must be netreduce or switchml: rdma
        --protocol switchml --elements 3    | allreduce: --elements must be even, 2..2048 (the job's elements per packet): 3
        --protocol switchml --elements 4096 | allreduce: --elements must be even, 2..2048 (the job's elements per packet): 4096
        --protocol switchml --elements 0    | allreduce: --elements must be even, 2..2048 (the job's elements per packet): 0
        --protocol switchml --outstanding 0 | allreduce: --outstanding must be 1..16384 (and at most the job's pool size): 0
        --protocol switchml --timeout-us 0  | allreduce: --timeout-us must be positive: 0
        --protocol switchml --udp-port 70000 | allreduce: --udp-port must be 1..65535: 70000
        --protocol switchml --switch-ip 10.77.0      | allreduce: --switch-ip must be an IPv4 address (a.b.c.d): 10.77.0
        --protocol switchml --switch-ip 10.77.0.256  | allreduce: --switch-ip must be an IPv4 address (a.b.c.d): 10.77.0.256
        --protocol switchml --switch-mac 02:77:00:00 | allreduce: --switch-mac must be a MAC address (aa:bb:cc:dd:ee:ff): 02:77:00:00
        --protocol switchml --local-workers 2        | allreduce: --local-workers, --racks and --trace apply to --protocol netreduce only
        --protocol switchml --racks 0-0,1-1          | allreduce: --local-workers, --racks and --trace apply to --protocol netreduce only
        --protocol switchml --idle spin              | allreduce: --idle must be poll or yield: spin
        --protocol switchml --world 65               | allreduce: --protocol switchml takes at most 64 workers: --world 65
        """)
    void shouldRefuseSwitchMlOptionsThatDoNotGoTogetherWithAClearMessageBeforeOpeningAPort(
        final String options, final String message)
    {
        final List<String> args = new ArrayList<>(List.of("--rank", "0", "--dev", "no-such-device"));
        args.addAll(List.of(options.trim().split(" +")));
        if (!args.contains("--world"))
        {
            args.addAll(List.of("--world", "2"));
        }
        final Refusal refusal = run(args.toArray(String[]::new));

        assertThat(refusal.exit()).isEqualTo(2);
        assertThat(refusal.stderr().strip()).isEqualTo(message.strip());
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
        --trees 0                         | allreduce: --trees must be 1..16
        --trees 17                        | allreduce: --trees must be 1..16
        --trees 2 --mode ring             | allreduce: --trees applies to --mode netreduce without --racks, --local-workers or --protocol switchml
        --trees 2 --local-workers 2       | allreduce: --trees applies to --mode netreduce without --racks, --local-workers or --protocol switchml
        --trees 2 --racks 0-0,1-1         | allreduce: --trees applies to --mode netreduce without --racks, --local-workers or --protocol switchml
        """)
    void shouldRefuseTreesThatDoNotGoTogetherWithAClearMessageBeforeOpeningAPort(
        final String options, final String message)
    {
        final List<String> args = new ArrayList<>(List.of("--rank", "0", "--world", "2", "--dev", "no-such-device"));
        args.addAll(List.of(options.trim().split(" +")));
        final Refusal refusal = run(args.toArray(String[]::new));

        assertThat(refusal.exit()).isEqualTo(2);
        assertThat(refusal.stderr().strip()).isEqualTo(message.strip());
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
        --peers 10.9.0.2                  | allreduce: --peers lists 1 hosts for 2 ranks
        --peers 10.9.0.1,10.9.0.2,10.9.0.3 | allreduce: --peers lists 3 hosts for 2 ranks
        --peers /tmp/nr-no-such-dir/peers  | allreduce: --peers /tmp/nr-no-such-dir/peers: no such file
        """)
    void shouldRefuseOptionsCheckedLaterInOneLineWithoutAStackTraceAsTheWorkerCommandRunsThem(
        final String options, final String message)
    {
        final List<String> args = new ArrayList<>(List.of("allreduce", "--rank", "0", "--world", "2", "--dev",
            "no-such-device"));
        args.addAll(List.of(options.trim().split(" +")));
        final PrintStream stderr = System.err;
        final ByteArrayOutputStream err = new ByteArrayOutputStream();
        final int exit;
        try
        {
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            exit = WorkerCommand.commandLine().execute(args.toArray(String[]::new));
        }
        finally
        {
            System.setErr(stderr);
        }

        assertThat(exit).isEqualTo(WorkerCommand.EXIT_USAGE);
        assertThat(err.toString(StandardCharsets.UTF_8).strip()).isEqualTo(message.strip());
    }

    @Test
    void shouldTakeOnlyThisPackagesOwnRefusalsForUsageErrorsAndKeepEveryOtherTrace()
    {
        assertThat(WorkerCommand.isUsageError(
            catchThrowable(() -> PeerHosts.resolve("10.9.0.2", 2)))).as("a worker command's own check").isTrue();
        assertThat(WorkerCommand.isUsageError(
            catchThrowable(() -> Integer.parseInt("x")))).as("the JDK's").isFalse();
        assertThat(WorkerCommand.isUsageError(
            catchThrowable(() -> new RcConfig().pmtu(3)))).as("the endpoint's").isFalse();
        assertThat(WorkerCommand.isUsageError(new IllegalStateException("x"))).isFalse();
    }

    @Test
    void shouldReadAPeersFileByRankAndRefuseALineWhoseRankIsNotANumber(@TempDir final Path dir) throws Exception
    {
        final Path file = Files.writeString(dir.resolve("peers"), "# rank host\n1 10.9.0.2\n0 10.9.0.1\n");
        assertThat(PeerHosts.resolve(file.toString(), 2)).containsExactly("10.9.0.1", "10.9.0.2");

        Files.writeString(file, "first 10.9.0.1\n");
        assertThat(catchThrowable(() -> PeerHosts.resolve(file.toString(), 2)))
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessage("peers file " + file + ": 'first' is not a rank (lines are 'HOST' or 'RANK HOST')");
    }

    @Test
    void shouldTellAMissingInterfaceFromOneWithoutAnAddress() throws Exception
    {
        assertThat(AllReduceCommand.interfaceAddress("lo").getHostAddress()).isEqualTo("127.0.0.1");
        assertThat(catchThrowable(() -> AllReduceCommand.interfaceAddress("nr-nosuch0")))
            .isInstanceOf(IllegalArgumentException.class).hasMessage("no interface nr-nosuch0 in this network namespace");
    }

    /** What the command printed on stderr, and its exit status. */
    private record Refusal(int exit, String stderr)
    {
    }

    private static Refusal run(final String... args)
    {
        final PrintStream stderr = System.err;
        final ByteArrayOutputStream err = new ByteArrayOutputStream();
        try
        {
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            final int exit = new CommandLine(new AllReduceCommand()).execute(args);
            return new Refusal(exit, err.toString(StandardCharsets.UTF_8));
        }
        finally
        {
            System.setErr(stderr);
        }
    }
}
