package io.netreduce.worker;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
import picocli.CommandLine;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code worker serve}'s quick command line reader ({@link ServeCommandLine}) against picocli: what it reads it reads
 * as picocli does, and what it is not sure of goes to picocli, which runs it or refuses it as before.
 */
class ServeCommandLineTest
{
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {
        "--dev eth0 --socket /tmp/nr/sidecar.sock",
        // what the Python sidecar transport passes
        "--dev eth0 --socket /tmp/nr/sidecar.sock --pmtu 4096 --rto-us 400000 --first-qpn 1048593 " +
            "--accept-timeout 60 --ip 10.77.0.2 --endpoint-nice 5 --doorbell-fd 7 --answer-fd 8",
        // and its switchml transport
        "--dev eth0 --socket /tmp/nr/sidecar.sock --protocol switchml --controller 10.77.0.253:50099 --elements 512 " +
            "--outstanding 64 --timeout-us 2000 --udp-port-base 40000 --accept-timeout 60",
        "--dev=eth0 --socket=/tmp/nr/s.sock --pmtu=1024 --rto-us=5 --ip=10.0.0.1",
        "--socket /tmp/nr/s.sock --no-segmentation-offload --dev eth0",
        "--socket /tmp/nr/s.sock --segmentation-offload --dev eth0",
        "--dev eth0 --socket /tmp/nr/s.sock --endpoint-nice -5 --pmtu +512 --accept-timeout 010",
        "--dev eth0 --socket relative.sock --first-qpn 2147483647 --timeout-us -1",
    })
    void shouldReadEveryOptionItTakesExactlyAsPicocliReadsIt(final String options)
    {
        final String[] args = ("serve " + options).split(" ");

        final ServeCommand quick = ServeCommandLine.parse(args);

        assertThat(quick).as("the quick reader takes it").isNotNull();
        assertThat(options(quick)).isEqualTo(options(picocli(args)));
    }

    @Test
    void shouldKnowEveryOptionServeHasSoThatNoneSendsTheSidecarThroughPicocli()
    {
        // An option added to ServeCommand and not to the quick reader would still work (through picocli), but every
        // sidecar started with it would pay picocli's start-up again.
        for (final Field field : ServeCommand.class.getDeclaredFields())
        {
            final CommandLine.Option option = field.getAnnotation(CommandLine.Option.class);
            if (option == null || field.getName().equals("dev") || field.getName().equals("socket"))
            {
                continue;
            }
            for (final String name : option.names())
            {
                final String value = field.getType() == boolean.class ? null :
                    field.getType() == String.class || field.getType() == java.nio.file.Path.class ? "x" : "7";
                final String[] args = value == null ?
                    new String[] { "serve", "--dev", "eth0", "--socket", "/tmp/s.sock", name } :
                    new String[] { "serve", "--dev", "eth0", "--socket", "/tmp/s.sock", name, value };

                final ServeCommand quick = ServeCommandLine.parse(args);

                assertThat(quick).as(name).isNotNull();
                assertThat(options(quick)).as(name).isEqualTo(options(picocli(args)));
            }
        }
    }

    @Test
    void shouldLeaveEveryOptionAtPicoclisDefaultWhenNotGiven()
    {
        final String[] args = { "serve", "--dev", "eth0", "--socket", "/tmp/nr/s.sock" };

        assertThat(options(ServeCommandLine.parse(args))).isEqualTo(options(picocli(args)))
            .containsEntry("pmtu", 4096).containsEntry("segmentationOffload", true).containsEntry("doorbellFd", null);
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {
        "serve --dev eth0 --socket /tmp/s.sock --segmentation-offload=false", // picocli reads it; the quick one not
        "serve --dev eth0 --socket /tmp/s.sock --pmtu 0x10",
        "serve --dev eth0 --socket /tmp/s.sock --pmtu 99999999999",
        "serve --dev eth0",
        "serve --dev eth0 --dev eth1 --socket /tmp/s.sock",
        "serve --dev eth0 --socket /tmp/s.sock --bogus 1",
        "serve --dev eth0 --socket /tmp/s.sock extra",
        "serve --dev eth0 --socket /tmp/s.sock --ip",
        "serve --ip --dev eth0 --socket /tmp/s.sock",
        "serve --dev eth0 --socket /tmp/s.sock --no-segmentation-offload --segmentation-offload",
        "serve --dev eth0 --socket @/tmp/args",
        "serve --help",
        "serve -h",
        "serve --version",
        "allreduce --dev eth0 --socket /tmp/s.sock",
        "--help",
    })
    void shouldLeaveToPicocliWhatItIsNotSureOf(final String line)
    {
        assertThat(ServeCommandLine.parse(line.split(" "))).isNull();
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
        --dev eth0                                       | Missing required option: '--socket=<socket>'
        --dev eth0 --dev eth1 --socket /tmp/s.sock       | option '--dev' (<dev>) should be specified only once
        --dev eth0 --socket /tmp/s.sock --pmtu 0x10      | Invalid value for option '--pmtu': '0x10' is not an int
        --dev eth0 --socket /tmp/s.sock --bogus 1        | Unknown options: '--bogus', '1'
        --dev eth0 --socket /tmp/s.sock extra            | Unmatched argument at index 5: 'extra'
        --dev eth0 --socket /tmp/s.sock --accept-timeout | Missing required parameter for option '--accept-timeout'
        """)
    void shouldStillRefuseABadCommandLineWithPicoclisClearMessage(final String options, final String message)
    {
        final Outcome outcome = execute(("serve " + options.strip()).split(" +"));

        assertThat(outcome.exit()).isEqualTo(2);
        assertThat(outcome.stderr()).startsWith(message).contains("Usage: worker serve");
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', textBlock = """
        --protocol rdma        | serve: --protocol must be netreduce or switchml: rdma
        --endpoint-nice 20     | serve: nice must be -20..19: 20
        --protocol switchml    | serve: --protocol switchml needs --controller HOST:PORT (the appliance's SwitchML controller)
        --first-qpn 16777216   | serve: firstQpn must be in [2, 16777215]: 16777216
        """)
    void shouldRefuseBadValuesOnTheQuickPathWithServesOwnMessageBeforeOpeningAPort(
        final String options, final String message)
    {
        final String[] args = ("serve --dev no-such-device --socket /tmp/nr-no-such-dir/s.sock " + options.strip())
            .split(" +");
        assertThat(ServeCommandLine.parse(args)).as("the quick reader takes it").isNotNull();

        final Outcome outcome = execute(args);

        assertThat(outcome.exit()).isEqualTo(2);
        assertThat(outcome.stderr().strip()).isEqualTo(message);
    }

    @Test
    void shouldEndAServeWhosePortCannotOpenWithOneLineNamingItOnEitherPath()
    {
        final String[] args = { "serve", "--dev", "no-such-device", "--socket", "/tmp/nr-serve-test-absent.sock" };

        final Outcome quick = execute(args);
        final Outcome slow = viaPicocli(args);

        assertThat(quick.exit()).isEqualTo(WorkerCommand.EXIT_PORT_FAILURE).isEqualTo(slow.exit());
        assertThat(quick.stderr().strip()).isEqualTo(slow.stderr().strip())
            .startsWith("serve: no such network interface 'no-such-device'")
            .doesNotContain("\tat ");
    }

    @Test
    void shouldRefuseASocketInADirectoryThatIsNotThereBeforeOpeningAPortOnEitherPathAndInTheAgent()
    {
        final String[] serve = { "serve", "--dev", "no-such-device", "--socket", "/tmp/nr-no-such-dir/s.sock" };
        final String message = "--socket /tmp/nr-no-such-dir/s.sock: directory /tmp/nr-no-such-dir does not exist";

        final Outcome quick = execute(serve);
        final Outcome slow = viaPicocli(serve);
        final Outcome agent = viaPicocli("agent", "--dev", "no-such-device", "--socket", "/tmp/nr-no-such-dir/s.sock");

        assertThat(quick.exit()).isEqualTo(2).isEqualTo(slow.exit()).isEqualTo(agent.exit());
        assertThat(quick.stderr().strip()).isEqualTo(slow.stderr().strip()).isEqualTo("serve: " + message);
        assertThat(agent.stderr().strip()).as("before the agent's probe of its port or its warm-up")
            .isEqualTo("agent: " + message);
    }

    private static ServeCommand picocli(final String[] args)
    {
        final CommandLine.ParseResult result = WorkerCommand.commandLine().parseArgs(args);
        return (ServeCommand)result.subcommand().commandSpec().userObject();
    }

    /** ServeCommand's option fields by name. */
    private static Map<String, Object> options(final ServeCommand command)
    {
        final Map<String, Object> values = new LinkedHashMap<>();
        for (final Field field : ServeCommand.class.getDeclaredFields())
        {
            if (!Modifier.isStatic(field.getModifiers()) && field.isAnnotationPresent(CommandLine.Option.class))
            {
                try
                {
                    field.setAccessible(true);
                    values.put(field.getName(), field.get(command));
                }
                catch (final IllegalAccessException ex)
                {
                    throw new AssertionError(ex);
                }
            }
        }
        assertThat(values).hasSizeGreaterThan(15);
        return values;
    }

    private static String firstLine(final String text)
    {
        return text.strip().lines().findFirst().orElse("");
    }

    private record Outcome(int exit, String stderr)
    {
    }

    private static Outcome execute(final String... args)
    {
        return capture(() -> WorkerCommand.execute(args));
    }

    private static Outcome viaPicocli(final String... args)
    {
        return capture(() -> WorkerCommand.commandLine().execute(args));
    }

    private static Outcome capture(final java.util.function.IntSupplier command)
    {
        final PrintStream stderr = System.err;
        final ByteArrayOutputStream err = new ByteArrayOutputStream();
        try
        {
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            final int exit = command.getAsInt();
            return new Outcome(exit, err.toString(StandardCharsets.UTF_8));
        }
        finally
        {
            System.setErr(stderr);
        }
    }
}
