package io.netreduce.daemon.pcap;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

/**
 * {@code netreduce pcap}: offline tools over capture files, built on the same wire parser and ICRC code the
 * dataplane runs.
 */
@Command(
    name = "pcap",
    mixinStandardHelpOptions = true,
    description = "Check and repair RoCEv2 captures.",
    subcommands = { PcapVerifyCommand.class, PcapFixCommand.class })
public final class PcapCommand implements Runnable
{
    /** Every RoCEv2 frame's ICRC verified (verify) or the output written (fix). */
    public static final int EXIT_OK = 0;
    /** verify: some RoCEv2 frame has a bad ICRC or is malformed or truncated. */
    public static final int EXIT_BAD_FRAMES = 1;
    /** The capture could not be read or written (also picocli's code for usage errors). */
    public static final int EXIT_FILE_ERROR = 2;

    @Spec
    private CommandSpec spec;

    @Override
    public void run()
    {
        spec.commandLine().usage(spec.commandLine().getOut());
    }
}
