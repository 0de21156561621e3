package io.netreduce.worker;

import io.netreduce.protocol.port.PortException;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * {@code netreduce worker}: the software RC endpoint run from the shell (perftest-style tools). The main class of
 * {@code netreduce-worker.jar}; the {@code netreduce} launcher runs that jar for {@code netreduce worker ...}.
 */
@Command(
    name = "worker",
    mixinStandardHelpOptions = true,
    description = "Software RoCEv2 RC endpoint tools (perftest style).",
    subcommands = { WriteBwCommand.class, AllReduceCommand.class, PortLatencyCommand.class, LoadGenCommand.class,
        ServeCommand.class, AgentCommand.class })
public final class WorkerCommand implements Runnable
{
    /** Exit status of a command whose port could not open or failed ({@link #operatorError}). */
    static final int EXIT_PORT_FAILURE = 3;
    /** Exit status of a command whose options do not go together (picocli's for a usage error). */
    static final int EXIT_USAGE = CommandLine.ExitCode.USAGE;

    @CommandLine.Spec
    private CommandLine.Model.CommandSpec spec;

    @Override
    public void run()
    {
        spec.commandLine().usage(System.out);
    }

    public static CommandLine commandLine()
    {
        return new CommandLine(new WorkerCommand()).setExecutionExceptionHandler(WorkerCommand::operatorError);
    }

    /**
     * What is the operator's to fix, not a bug, gets one line naming the command and the cause, no stack trace: a
     * port that cannot open (no such interface, no CAP_NET_RAW, rings the kernel refuses) or fails, status
     * {@link #EXIT_PORT_FAILURE}; options that do not go together ({@link #isUsageError}), status
     * {@link #EXIT_USAGE}. Anything else is rethrown to picocli, which prints it whole.
     */
    static int operatorError(final Exception ex, final CommandLine commandLine, final CommandLine.ParseResult parsed)
        throws Exception
    {
        if (ex instanceof PortException || isUsageError(ex))
        {
            commandLine.getErr().println(commandLine.getCommandName() + ": " + ex.getMessage());
            return ex instanceof PortException ? EXIT_PORT_FAILURE : EXIT_USAGE;
        }
        throw ex;
    }

    /**
     * @return whether {@code ex} is a worker command's own refusal of its options: an IllegalArgumentException thrown
     * by this package's code (`--peers lists 1 hosts for 2 ranks`, `eth0 has no IPv4 address; pass --ip`). One thrown
     * deeper (the endpoint, the JDK) is a bug's and keeps its stack trace.
     */
    static boolean isUsageError(final Throwable ex)
    {
        final StackTraceElement[] trace = ex.getStackTrace();
        return ex instanceof IllegalArgumentException && trace.length > 0 &&
            trace[0].getClassName().startsWith(WorkerCommand.class.getPackageName() + ".");
    }

    /** The jar's main class is {@link WorkerMain}, which comes here for every command line but a quick serve. */
    public static void main(final String[] args)
    {
        System.exit(execute(args));
    }

    /**
     * Runs a {@code netreduce worker} command line.
     * <p>
     * The sidecar ({@code worker serve}), started once per trainer process, skips picocli when its command line is
     * one {@link ServeCommandLine} is sure of: its start is what a Session waits for. Every other command line, and
     * any serve command line that reader is not sure of (help, a bad option or value), goes to picocli.
     *
     * @return the exit status.
     */
    static int execute(final String[] args)
    {
        final ServeCommand serve = ServeCommandLine.parse(args);
        return serve != null ? ServeCommandLine.run(serve) : commandLine().execute(args);
    }
}
