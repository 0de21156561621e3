package io.netreduce.daemon.worker;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * {@code netreduce worker}: the software RC endpoint run from the shell (perftest-style tools).
 */
@Command(
    name = "worker",
    mixinStandardHelpOptions = true,
    description = "Software RoCEv2 RC endpoint tools (perftest style).",
    subcommands = { WriteBwCommand.class, AllReduceCommand.class, PortLatencyCommand.class })
public final class WorkerCommand implements Runnable
{
    @CommandLine.Spec
    private CommandLine.Model.CommandSpec spec;

    @Override
    public void run()
    {
        spec.commandLine().usage(System.out);
    }
}
