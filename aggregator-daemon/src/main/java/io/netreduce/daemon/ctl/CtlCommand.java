package io.netreduce.daemon.ctl;

import io.netreduce.controlplane.config.ApplianceConfig;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ScopeType;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/**
 * {@code netreduce ctl ...}: talk to a running daemon's control API. Human-readable tables by default,
 * the API's JSON with {@code --json}. Exit status: 0 done, 1 the daemon refused the request, 2 a usage error or a file it cannot send, 3 cannot reach it.
 */
@Command(
    name = "ctl",
    mixinStandardHelpOptions = true,
    description = "Query and change a running netreduce daemon through its control API.",
    subcommands = {
        CtlSubcommands.Jobs.class,
        CtlSubcommands.Job.class,
        CtlSubcommands.AddJob.class,
        CtlSubcommands.RemoveJob.class,
        CtlSubcommands.Rings.class,
        CtlSubcommands.Counters.class,
        CtlSubcommands.Clt.class,
        CtlSubcommands.Ctt.class,
        CtlSwitchMlCommand.class,
        CtlSubcommands.Occupancy.class,
        CtlSubcommands.Latency.class,
        CtlSubcommands.Reload.class,
        CtlCaptureCommands.Captures.class,
        CtlCaptureCommands.Capture.class
    })
public final class CtlCommand implements Runnable
{
    /** Exit status when the daemon answered with an error. */
    public static final int EXIT_REFUSED = 1;
    /** Exit status when the daemon cannot be reached. */
    public static final int EXIT_UNREACHABLE = 3;

    @Spec
    CommandSpec spec;

    @Option(names = "--api", scope = ScopeType.INHERIT, paramLabel = "ADDRESS",
        defaultValue = "${env:NETREDUCE_API:-" + ApplianceConfig.DEFAULT_API_LISTEN + "}",
        description = "Control API address: host:port or unix:/path (default: ${DEFAULT-VALUE}; env NETREDUCE_API).")
    String api;

    @Option(names = "--token-file", scope = ScopeType.INHERIT, paramLabel = "FILE",
        defaultValue = "${env:NETREDUCE_API_TOKEN_FILE:-/etc/netreduce/api.token}",
        description = "The API's token (appliance.api.tokenFile), sent when the API is on TCP " +
            "(default: ${DEFAULT-VALUE}; env NETREDUCE_API_TOKEN_FILE).")
    String tokenFile;

    @Option(names = "--json", scope = ScopeType.INHERIT, description = "Print the API's JSON instead of a table.")
    boolean json;

    @Option(names = "--timeout", scope = ScopeType.INHERIT, paramLabel = "SECONDS", defaultValue = "10",
        description = "How long to wait for the daemon (default: ${DEFAULT-VALUE}).")
    int timeoutSeconds;

    @Override
    public void run()
    {
        spec.commandLine().usage(spec.commandLine().getOut());
    }
}
