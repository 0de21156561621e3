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
    /** Exit status of a command whose port could not open or failed ({@link #portFailure}). */
    static final int EXIT_PORT_FAILURE = 3;

    @CommandLine.Spec
    private CommandLine.Model.CommandSpec spec;

    @Override
    public void run()
    {
        spec.commandLine().usage(System.out);
    }

    public static CommandLine commandLine()
    {
        return new CommandLine(new WorkerCommand()).setExecutionExceptionHandler(WorkerCommand::portFailure);
    }

    /**
     * A port that cannot open (no such interface, no CAP_NET_RAW, rings the kernel refuses) or fails is the
     * operator's to fix, not a bug: one line naming the command and what failed, status
     * {@link #EXIT_PORT_FAILURE}, no stack trace. Anything else is rethrown to picocli, which prints it whole.
     */
    static int portFailure(final Exception ex, final CommandLine commandLine, final CommandLine.ParseResult parsed)
        throws Exception
    {
        if (ex instanceof PortException)
        {
            commandLine.getErr().println(commandLine.getCommandName() + ": " + ex.getMessage());
            return EXIT_PORT_FAILURE;
        }
        throw ex;
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
