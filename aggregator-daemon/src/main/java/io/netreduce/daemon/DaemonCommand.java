package io.netreduce.daemon;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import io.netreduce.controlplane.config.ConfigError;
import io.netreduce.controlplane.config.ConfigException;
import io.netreduce.controlplane.config.ConfigFaultException;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.ConfigValidator;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.ValidationOptions;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;
import sun.misc.Signal;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Callable;

/**
 * {@code netreduce daemon --config FILE}: validate the configuration (every error printed, exit 2 on any), start
 * the appliance, the control API and the metrics endpoint, reload on SIGHUP, stop cleanly on SIGTERM/SIGINT.
 */
@Command(
    name = "daemon",
    mixinStandardHelpOptions = true,
    description = "Run the appliance: load and validate the configuration, serve the control API and metrics.")
public final class DaemonCommand implements Callable<Integer>
{
    /** Exit status for an invalid configuration. */
    public static final int EXIT_CONFIG = 2;
    private static final Logger LOG = LoggerFactory.getLogger(DaemonCommand.class);

    @Spec
    private CommandSpec spec;

    @Option(names = { "-c", "--config" }, required = true, paramLabel = "FILE",
        description = "The YAML configuration file.")
    private Path config;

    @Option(names = "--name", paramLabel = "NAME",
        description = "This appliance's name in multi-rack topologies (overrides appliance.name): it takes the " +
            "role the topology gives that name, a rack's leaf or the spine.")
    private String name;

    @Option(names = "--check", description = "Validate the configuration, print the result and exit.")
    private boolean checkOnly;

    @Option(names = "--skip-interface-check",
        description = "Do not require the configured ports to be interfaces of this host (for trying a config).")
    private boolean skipInterfaceCheck;

    @Option(names = "--no-dataplane",
        description = "Run the control plane only (API, validation, reload) without opening ports: for trying a config.")
    private boolean noDataplane;

    /** The dataplane to attach; null means AF_PACKET ports from the config (or none with --no-dataplane). */
    DataplaneAttachment dataplane;

    @Override
    public Integer call() throws Exception
    {
        final PrintWriter err = spec.commandLine().getErr();
        final PrintWriter out = spec.commandLine().getOut();
        final ValidationOptions options =
            skipInterfaceCheck ? ValidationOptions.DOCUMENT_ONLY : ValidationOptions.ON_THIS_HOST;
        final Path file = config.toAbsolutePath();
        final NetreduceConfig loaded;
        try
        {
            loaded = load(file, options);
        }
        catch (final ConfigException ex)
        {
            err.println(file + ": " + ex.errors().size() + " configuration error(s); not starting");
            for (final ConfigError error : ex.errors())
            {
                err.println("  " + error);
            }
            err.flush();
            return EXIT_CONFIG;
        }
        if (checkOnly)
        {
            final NetreduceConfig served = loaded.served();
            final String applianceName = loaded.appliance().name();
            out.println(file + ": valid (" + loaded.jobs().size() + " job(s), " +
                loaded.jobs().stream().mapToInt(job -> job.rings().size()).sum() + " ring(s)" +
                (served.equals(loaded) ? "" : "; as " + (applianceName == null ? "an unnamed appliance" :
                    "'" + applianceName + "'") + " it installs " +
                    served.jobs().stream().mapToInt(job -> job.rings().size()).sum() + " ring(s) of " +
                    served.jobs().size() + " job(s)") + ")");
            out.flush();
            return 0;
        }
        setRootLevel(loaded.appliance().logLevel().name());

        final Daemon daemon;
        try
        {
            final DataplaneAttachment attached = dataplane != null ? dataplane :
                noDataplane ? DataplaneAttachment.NONE : PacketDataplane.onAfPacketPorts();
            daemon = Daemon.start(loaded, () -> load(file, options), options, attached);
        }
        catch (final Exception ex)
        {
            // Typically a listen address in use or a socket directory missing: say which, without a stack trace.
            // What the configuration is at fault for (a path it cannot bind, a token file others can read) exits
            // with the configuration's status, which the unit does not restart on; anything else (an address in
            // use) may pass, and exits 1.
            final boolean configFault = isConfigFault(ex);
            final String why = configFault ? " (the configuration is at fault; exit status " + EXIT_CONFIG + ")" : "";
            LOG.error("cannot start: {}{}", ex.toString(), why);
            err.println("netreduce: cannot start: " + ex + why);
            err.flush();
            return configFault ? EXIT_CONFIG : 1;
        }
        final CountDownLatch stopped = new CountDownLatch(1);
        final ExecutorService reloads = Executors.newSingleThreadExecutor(runnable ->
        {
            final Thread thread = new Thread(runnable, "netreduce-reload");
            thread.setDaemon(true);
            return thread;
        });
        // The JDK has no supported API for SIGHUP; sun.misc.Signal (module jdk.unsupported, exported on purpose)
        // is what long-running Java daemons use for it. The handler only queues the reload: the signal thread
        // must not block, and reloads are serialised on one thread.
        Signal.handle(new Signal("HUP"), signal ->
        {
            LOG.info("SIGHUP: reloading {}", file);
            reloads.execute(daemon::reload);
        });
        // SIGTERM and SIGINT run shutdown hooks: close the API, the dataplane (stop intake, finish the batch,
        // close ports), the metrics endpoint, then flush the logs.
        Runtime.getRuntime().addShutdownHook(new Thread(() ->
        {
            reloads.shutdownNow();
            daemon.close();
            stopped.countDown();
            if (LoggerFactory.getILoggerFactory() instanceof LoggerContext context)
            {
                context.stop();
            }
        }, "netreduce-shutdown"));
        stopped.await();
        return 0;
    }

    /**
     * Load the file and, with {@code --name}, take that name: the role checks (whose memory the budget counts)
     * then run for it, so the file is validated again under the new name.
     */
    private NetreduceConfig load(final Path file, final ValidationOptions options) throws ConfigException
    {
        final NetreduceConfig loaded = ConfigLoader.load(file, options);
        if (name == null)
        {
            return loaded;
        }
        final NetreduceConfig named = loaded.withApplianceName(name);
        final List<ConfigError> errors = new ArrayList<>();
        for (final ConfigError error : ConfigValidator.validate(named, options))
        {
            // The name came from the command line: say so rather than blame a key the file may not have.
            errors.add("appliance.name".equals(error.path()) ? new ConfigError("--name", error.message()) : error);
        }
        if (!errors.isEmpty())
        {
            throw new ConfigException(errors);
        }
        return named;
    }

    static boolean isConfigFault(final Throwable failure)
    {
        for (Throwable cause = failure; cause != null; cause = cause.getCause())
        {
            if (cause instanceof ConfigFaultException)
            {
                return true;
            }
        }
        return false;
    }

    private static void setRootLevel(final String level)
    {
        if (LoggerFactory.getLogger(Logger.ROOT_LOGGER_NAME) instanceof ch.qos.logback.classic.Logger root)
        {
            root.setLevel(Level.toLevel(level, Level.INFO));
        }
    }
}
