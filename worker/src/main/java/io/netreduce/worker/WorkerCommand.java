package io.netreduce.worker;

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
    subcommands = { WriteBwCommand.class, AllReduceCommand.class, PortLatencyCommand.class, LoadGenCommand.class, ServeCommand.class })
public final class WorkerCommand implements Runnable
{
    @CommandLine.Spec
    private CommandLine.Model.CommandSpec spec;

    @Override
    public void run()
    {
        spec.commandLine().usage(System.out);
    }

    public static CommandLine commandLine()
    {
        return new CommandLine(new WorkerCommand());
    }

    public static void main(final String[] args)
    {
        System.exit(commandLine().execute(args));
    }
}
