package io.netreduce.daemon;

import io.netreduce.daemon.ctl.CtlCommand;

import io.netreduce.daemon.pcap.PcapCommand;
import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.security.SecureRandom;
import java.util.HexFormat;

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

    /** Netty's property for the machine part of its channel ids. */
    static final String NETTY_MACHINE_ID = "io.netty.machineId";

    /**
     * Give Netty a machine id of random bytes, unless one was set ({@code -Dio.netty.machineId=...}). Netty only
     * uses it to make its channel ids unique; without it, Netty looks for a hardware address among the network
     * interfaces and, in a network namespace or a sandbox that has none (a systemd unit with
     * {@code PrivateNetwork=}, a container, the test bed's namespaces), logs a warning on every start of every
     * command, {@code ctl} included, before taking random bytes anyway. The bytes are a locally administered
     * unicast EUI-64, the form Netty takes.
     */
    static void quietNettyMachineId()
    {
        if (System.getProperty(NETTY_MACHINE_ID) == null)
        {
            final byte[] id = new byte[8];
            new SecureRandom().nextBytes(id);
            id[0] = (byte)((id[0] & 0xFC) | 0x02);
            System.setProperty(NETTY_MACHINE_ID, HexFormat.ofDelimiter(":").formatHex(id));
        }
    }

    public static void main(final String[] args)
    {
        quietNettyMachineId();
        System.exit(commandLine().execute(args));
    }
}
