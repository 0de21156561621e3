package io.netreduce.daemon;

import io.netreduce.daemon.ctl.CtlCommand;

import io.netreduce.daemon.pcap.PcapCommand;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code netreduce} command. Subcommands are the daemon itself and the tools around it. The worker tools
 * ({@code netreduce worker ...}) live in {@code netreduce-worker.jar}; the launcher script runs that jar for them.
 */
@Command(
    name = "netreduce",
    mixinStandardHelpOptions = true,
    version = "netreduce 0.1.0",
    description = "Software in-network aggregation appliance beneath RoCEv2.",
    subcommands = {
        CommandLine.HelpCommand.class,
        DaemonCommand.class,
        PcapCommand.class,
        CtlCommand.class
    })
public final class NetreduceMain implements Runnable
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
        return new CommandLine(new NetreduceMain());
    }

    public static void main(final String[] args)
    {
        System.exit(commandLine().execute(args));
    }
}
