package io.netreduce.worker;

import io.netreduce.protocol.port.PortException;

import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;

/**
 * The quick way into {@code netreduce worker serve}: reads its command line without picocli, because the sidecar is
 * started once per trainer process, four or eight at once on a host, and every CPU-millisecond before its
 * {@code listening} line is one the Session waits for.
 * <p>
 * Why: picocli builds the model of every subcommand of {@code worker} reflectively before it parses anything, and
 * its classes (compiled for Java 5) cannot go into the JVM's ahead-of-time cache; {@code worker serve} through
 * picocli took about 0.35 CPU-s more to its {@code listening} line than through this reader (docs/performance.md,
 * "Start-up and the first calls").
 * <p>
 * It reads only what it is sure of, exactly as picocli would: each of {@link ServeCommand}'s options at most once,
 * as {@code --name value} or {@code --name=value}, numbers as {@link Integer#parseInt}/{@link Long#parseLong} read
 * them (what picocli's converters use), {@code --[no-]segmentation-offload} without a value, and both required
 * options. Anything else (help, version, an unknown or repeated option, a value it cannot convert, a value that
 * starts with '-' where a number is not expected, an {@code @file}, a positional argument) makes it answer null, and
 * the caller hands the whole command line to picocli, which runs it or refuses it with its usual message. So the
 * quick path changes how fast a good command line starts, never what any command line means (ServeCommandLineTest
 * holds the two readers to the same fields).
 */
final class ServeCommandLine
{
    /** Exit status of a command whose run threw: picocli's (CommandLine.ExitCode.SOFTWARE). */
    static final int EXIT_EXCEPTION = 1;

    private ServeCommandLine()
    {
    }

    /**
     * @param args the worker jar's arguments, {@code serve} first.
     * @return the serve command with its options set, or null when the command line is not one this reader is sure
     * of (picocli must read it).
     */
    static ServeCommand parse(final String[] args)
    {
        if (args.length == 0 || !"serve".equals(args[0]))
        {
            return null;
        }
        final ServeCommand command = new ServeCommand();
        final Set<String> seen = new HashSet<>();
        int i = 1;
        while (i < args.length)
        {
            final String arg = args[i++];
            if (!arg.startsWith("--"))
            {
                return null; // -h, -V, an @file, a positional argument: picocli's
            }
            final int equals = arg.indexOf('=');
            final String name = equals < 0 ? arg : arg.substring(0, equals);
            if ("--segmentation-offload".equals(name) || "--no-segmentation-offload".equals(name))
            {
                if (equals >= 0 || !seen.add("--segmentation-offload"))
                {
                    return null;
                }
                command.segmentationOffload = "--segmentation-offload".equals(name);
                continue;
            }
            if (!seen.add(name))
            {
                return null; // picocli refuses an option given twice
            }
            final String value;
            if (equals >= 0)
            {
                value = arg.substring(equals + 1);
            }
            else if (i < args.length)
            {
                value = args[i++];
            }
            else
            {
                return null; // a missing value: picocli says so
            }
            if (value.startsWith("@") || !set(command, name, value))
            {
                return null;
            }
        }
        return seen.contains("--dev") && seen.contains("--socket") ? command : null;
    }

    /**
     * Runs a command {@link #parse} made, as picocli's {@code execute} would: its status, or, when it throws, the
     * stack trace on standard error and {@link #EXIT_EXCEPTION}; a port that cannot open or fails gets one line and
     * {@link WorkerCommand#EXIT_PORT_FAILURE}, options that do not go together one line and
     * {@link WorkerCommand#EXIT_USAGE}, as the picocli path gives them.
     */
    static int run(final ServeCommand command)
    {
        try
        {
            return command.call();
        }
        catch (final PortException ex)
        {
            System.err.println("serve: " + ex.getMessage());
            return WorkerCommand.EXIT_PORT_FAILURE;
        }
        catch (final Exception ex)
        {
            if (WorkerCommand.isUsageError(ex))
            {
                System.err.println("serve: " + ex.getMessage());
                return WorkerCommand.EXIT_USAGE;
            }
            ex.printStackTrace(System.err);
            return EXIT_EXCEPTION;
        }
    }

    /**
     * @return false when {@code name} is no option of serve's or {@code value} is not one this reader is sure of.
     */
    private static boolean set(final ServeCommand command, final String name, final String value)
    {
        try
        {
            switch (name)
            {
                case "--dev" -> command.dev = text(value);
                case "--ip" -> command.ip = text(value);
                case "--socket" -> command.socket = Path.of(text(value));
                case "--protocol" -> command.protocol = text(value);
                case "--controller" -> command.controller = text(value);
                case "--elements" -> command.elements = Integer.parseInt(value);
                case "--outstanding" -> command.outstanding = Integer.parseInt(value);
                case "--timeout-us" -> command.timeoutMicros = Long.parseLong(value);
                case "--udp-port-base" -> command.udpPortBase = Integer.parseInt(value);
                case "--pmtu" -> command.pmtu = Integer.parseInt(value);
                case "--first-qpn" -> command.firstQpn = Integer.parseInt(value);
                case "--rto-us" -> command.rtoMicros = Long.parseLong(value);
                case "--endpoint-nice" -> command.endpointNice = Integer.parseInt(value);
                case "--doorbell-fd" -> command.doorbellFd = Integer.parseInt(value);
                case "--answer-fd" -> command.answerFd = Integer.parseInt(value);
                case "--accept-timeout" -> command.acceptTimeoutSeconds = Integer.parseInt(value);
                case "--warm-up-frames" -> command.warmUpFrames = Long.parseLong(value);
                default ->
                {
                    return false;
                }
            }
            return true;
        }
        catch (final IllegalArgumentException ex) // NumberFormatException, InvalidPathException, an option-like text
        {
            return false;
        }
    }

    /**
     * A text option's value: one that starts with '-' may be an option whose value is missing, which picocli tells.
     */
    private static String text(final String value)
    {
        if (value.startsWith("-"))
        {
            throw new IllegalArgumentException(value);
        }
        return value;
    }
}
