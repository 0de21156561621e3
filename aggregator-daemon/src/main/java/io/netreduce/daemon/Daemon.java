package io.netreduce.daemon;

import io.netreduce.controlplane.metrics.SnapshotCollector;

import io.netreduce.controlplane.api.ConfigSource;
import io.netreduce.controlplane.api.ConfiguredAppliance;
import io.netreduce.controlplane.api.ControlApi;
import io.netreduce.controlplane.api.HttpEndpoint;
import java.nio.file.Path;
import io.netreduce.controlplane.api.TokenFile;
import io.netreduce.controlplane.api.AccessPolicy;
import io.netreduce.controlplane.api.ReloadObserver;
import io.netreduce.controlplane.api.ReloadResult;
import io.netreduce.controlplane.config.ByteSize;
import io.netreduce.controlplane.config.ConfigException;
import io.netreduce.controlplane.config.JobConfig;
import io.netreduce.controlplane.config.ListenAddress;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.PortConfig;
import io.netreduce.controlplane.config.RingConfig;
import io.netreduce.controlplane.config.ValidationOptions;
import io.netreduce.controlplane.metrics.ConfigMetricsSource;
import io.netreduce.controlplane.metrics.ControlPlaneMetrics;
import io.netreduce.controlplane.metrics.MetricsEndpoint;
import io.netreduce.controlplane.metrics.MetricsSource;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.stream.Collectors;

/**
 * A running netreduce daemon: the configured appliance, the dataplane attachment, the control API and the
 * metrics endpoint. Started from a validated configuration; {@link #reload()} applies a new one; {@link #close()}
 * shuts down in order (API first so no new commands arrive, then the dataplane, then metrics).
 */
public final class Daemon implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(Daemon.class);

    private final DataplaneAttachment dataplane;
    private final ConfiguredAppliance appliance;
    private final HttpEndpoint api;
    private final MetricsEndpoint metrics;
    private boolean closed;

    private Daemon(
        final NetreduceConfig config,
        final ConfigSource source,
        final ValidationOptions options,
        final DataplaneAttachment dataplane) throws InterruptedException
    {
        this.dataplane = dataplane;
        final PrometheusRegistry registry = new PrometheusRegistry();
        final ControlPlaneMetrics controlPlaneMetrics = new ControlPlaneMetrics(registry);
        LateClasses.load(); // before the dataplane's warm-up compiles the packet path (see LateClasses)
        dataplane.start(config);
        appliance = new ConfiguredAppliance(config, source, dataplane.installer(), options, new ReloadObserver()
        {
            @Override
            public void applied(final ReloadResult result)
            {
                controlPlaneMetrics.reloadApplied();
            }

            @Override
            public void refused(final ConfigException error)
            {
                controlPlaneMetrics.reloadRefused();
            }
        });
        registry.register(new SnapshotCollector(MetricsSource.composite(
            List.of(new ConfigMetricsSource(appliance::config), dataplane.metrics()))));

        HttpEndpoint startedApi = null;
        try
        {
            startedApi = HttpEndpoint.start("api", config.appliance().api(),
                new ControlApi(dataplane.control(appliance)), accessPolicy(config));
            metrics = new MetricsEndpoint(registry).start(config.appliance().metrics());
        }
        catch (final RuntimeException | InterruptedException ex)
        {
            if (startedApi != null)
            {
                startedApi.close();
            }
            dataplane.close();
            throw ex;
        }
        api = startedApi;
        logSummary(config);
    }

    /**
     * Who may use the control API: no web page; on TCP, holders of the token from {@code appliance.api.tokenFile}
     * (created owner-only if missing). Health and the parameters clients of a ring must match are open reads.
     */
    private static AccessPolicy accessPolicy(final NetreduceConfig config)
    {
        final ListenAddress api = config.appliance().api();
        String token = null;
        try
        {
            if (api.isUnix())
            {
                createDefaultSocketDirectory(api);
            }
            else
            {
                token = TokenFile.loadOrCreate(Path.of(config.appliance().apiTokenFile()));
                apiToken = token;
            }
        }
        catch (final java.io.IOException ex)
        {
            throw new io.netreduce.controlplane.config.ConfigFaultException("appliance.api.tokenFile: " +
                ex.getMessage(), ex);
        }
        return new AccessPolicy(api, token, path -> path.equals("/v1/health") ||
            OPEN_RING_READ.matcher(path).matches());
    }

    private static final java.util.regex.Pattern OPEN_RING_READ =
        java.util.regex.Pattern.compile("/v1/rings/[0-9]{1,3}/parameters");

    /** The token of the API last started on TCP (for tests driving a daemon in this JVM). */
    private static volatile String apiToken;

    /**
     * @return the token of the API last started on TCP in this JVM, or null.
     */
    public static String apiToken()
    {
        return apiToken;
    }

    /**
     * The default socket's directory ({@code /run/netreduce}) is the daemon's to make when systemd did not (a run by
     * hand): owner-only, like the socket.
     */
    private static void createDefaultSocketDirectory(final ListenAddress api) throws java.io.IOException
    {
        final Path dir = api.unixPath().toAbsolutePath().getParent();
        if (dir != null && !java.nio.file.Files.exists(dir) &&
            api.equals(ListenAddress.parse(io.netreduce.controlplane.config.ApplianceConfig.DEFAULT_API_LISTEN)))
        {
            java.nio.file.Files.createDirectories(dir, java.nio.file.attribute.PosixFilePermissions.asFileAttribute(
                java.nio.file.attribute.PosixFilePermissions.fromString("rwx------")));
        }
    }

    /**
     * Start a daemon.
     *
     * @param config    the validated configuration.
     * @param source    where reloads read the configuration.
     * @param options   host checks for reloads and API additions.
     * @param dataplane the dataplane attachment, or {@link DataplaneAttachment#NONE}.
     * @return the running daemon.
     * @throws InterruptedException if interrupted while binding.
     */
    public static Daemon start(
        final NetreduceConfig config,
        final ConfigSource source,
        final ValidationOptions options,
        final DataplaneAttachment dataplane) throws InterruptedException
    {
        return new Daemon(config, source, options, dataplane);
    }

    /**
     * Reload the configuration from its source (SIGHUP). Errors are logged and counted; the running configuration
     * stays.
     *
     * @return what changed, or null if the new configuration was refused.
     */
    public ReloadResult reload()
    {
        try
        {
            return appliance.reload();
        }
        catch (final ConfigException ex)
        {
            return null;
        }
    }

    /**
     * @return the running configuration.
     */
    public NetreduceConfig config()
    {
        return appliance.config();
    }

    /**
     * @return where the API actually listens (the real port if 0 was configured).
     */
    public ListenAddress apiAddress()
    {
        return api.boundAddress();
    }

    /**
     * @return where the metrics endpoint actually listens.
     */
    public ListenAddress metricsAddress()
    {
        return metrics.boundAddress();
    }

    @Override
    public synchronized void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        LOG.info("shutting down");
        api.close();
        dataplane.close();
        metrics.close();
        LOG.info("stopped");
    }

    private void logSummary(final NetreduceConfig config)
    {
        final var appliance = config.appliance();
        LOG.info("netreduce started: ports [{}], idle {}, batch {}, command queue {}",
            appliance.ports().stream().map(p -> p.name() + " mtu " + p.mtu()).collect(Collectors.joining(", ")),
            appliance.dataplane().idleStrategy().configName(),
            appliance.dataplane().batchSize(), appliance.dataplane().commandQueueCapacity());
        int rings = 0;
        for (final JobConfig job : config.jobs())
        {
            for (final RingConfig ring : job.rings())
            {
                rings++;
                LOG.info("  job {} ring {}: {} ranks, {} window {} msgLen {} payload {} pmtu {}, aggregators {}",
                    job.name(), ring.id(), ring.worldSize(), ring.elementType().cliName(), ring.window(),
                    ring.msgLen(), ring.payloadSize(), ring.pmtu(), ByteSize.human(ring.aggregatorBytes()));
            }
        }
        LOG.info("{} job(s), {} ring(s); aggregator memory {} of budget {}; API on {}, metrics on {}{}",
            config.jobs().size(), rings, ByteSize.human(config.aggregatorBytes()),
            ByteSize.format(appliance.memoryBudget()), apiAddress(), metricsAddress(), "/metrics");
        if (dataplane == DataplaneAttachment.NONE)
        {
            LOG.warn("no dataplane attached: jobs are accepted and validated but no traffic is aggregated");
        }
        final List<PortConfig> ports = appliance.ports();
        LOG.debug("ports configured: {}", ports);
    }
}
