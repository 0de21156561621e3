package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.ConfigDiff;
import io.netreduce.controlplane.config.ConfigError;
import io.netreduce.controlplane.config.ConfigException;
import io.netreduce.controlplane.config.ConfigValidator;
import io.netreduce.controlplane.config.JobConfig;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.RingConfig;
import io.netreduce.controlplane.config.RingRef;
import io.netreduce.controlplane.config.ValidationOptions;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The configuration side of the appliance: holds the running configuration, answers job and ring queries,
 * validates additions against the whole running configuration, and applies reloads as a {@link ConfigDiff}
 * through a {@link RingInstaller}. Queries of dataplane state (tables, counters, histograms, captures) are not
 * its business: it answers them with {@link UnsupportedOperationException} until the daemon wraps it with a
 * dataplane-backed implementation.
 * <p>
 * Thread-safe by a monitor: API requests and SIGHUP reloads arrive on different threads, and none of this is on
 * the packet path.
 */
public final class ConfiguredAppliance implements ApplianceControl
{
    private static final Logger LOG = LoggerFactory.getLogger(ConfiguredAppliance.class);
    private static final String NO_DATAPLANE = "no dataplane attached to this control plane";

    private final ConfigSource source;
    private final RingInstaller installer;
    private final ValidationOptions options;
    private final ReloadObserver observer;
    private NetreduceConfig config;

    /**
     * Apply an initial configuration: every ring is installed.
     *
     * @param initial   the validated configuration to start with.
     * @param source    where {@link #reload()} reads the next configuration.
     * @param installer where ring changes go.
     * @param options   host checks to apply to additions.
     */
    public ConfiguredAppliance(
        final NetreduceConfig initial,
        final ConfigSource source,
        final RingInstaller installer,
        final ValidationOptions options)
    {
        this(initial, source, installer, options, ReloadObserver.NONE);
    }

    /**
     * Apply an initial configuration: every ring is installed.
     *
     * @param initial   the validated configuration to start with.
     * @param source    where {@link #reload()} reads the next configuration.
     * @param installer where ring changes go.
     * @param options   host checks to apply to additions.
     * @param observer  told the outcome of every reload.
     */
    public ConfiguredAppliance(
        final NetreduceConfig initial,
        final ConfigSource source,
        final RingInstaller installer,
        final ValidationOptions options,
        final ReloadObserver observer)
    {
        this.observer = observer;
        this.source = source;
        this.installer = installer;
        this.options = options;
        this.config = new NetreduceConfig(initial.appliance(), List.of());
        final NetreduceConfig served = served(initial);
        apply(ConfigDiff.between(config, served), served);
    }

    /**
     * One topology file describes a multi-rack job for all its appliances; this one keeps the rings it has a role
     * in (by its name) and says which it leaves to the others.
     */
    private static NetreduceConfig served(final NetreduceConfig full)
    {
        final String name = full.appliance().name();
        for (final JobConfig job : full.jobs())
        {
            final JobConfig mine = job.servedBy(name);
            if (!mine.isServed())
            {
                LOG.info("job {}: this appliance ({}) is neither the spine nor a leaf of its rings; skipped",
                    job.name(), name == null ? "no appliance.name or --name" : "'" + name + "'");
            }
            else if (mine.rings().size() < job.rings().size())
            {
                LOG.info("job {}: {} of its {} ring(s) have no role for this appliance ('{}'); they are skipped",
                    job.name(), job.rings().size() - mine.rings().size(), job.rings().size(), name);
            }
        }
        return full.served();
    }

    /**
     * @return the running configuration.
     */
    public synchronized NetreduceConfig config()
    {
        return config;
    }

    @Override
    public synchronized List<JobConfig> listJobs()
    {
        return config.jobs();
    }

    @Override
    public synchronized Optional<JobConfig> job(final String name)
    {
        return config.job(name);
    }

    @Override
    public synchronized JobConfig addJob(final JobConfig job) throws ConfigException
    {
        if (config.job(job.name()).isPresent())
        {
            throw new ConflictException("job '" + job.name() + "' already exists");
        }
        final List<ConfigError> errors = ConfigValidator.validate(config.withJob(job), options);
        if (!errors.isEmpty())
        {
            throw new ConfigException(errors);
        }
        final NetreduceConfig next = served(config.withJob(job));
        apply(ConfigDiff.between(config, next), next);
        LOG.info("job {} added through the API with {} ring(s)", job.name(), job.rings().size());
        return job;
    }

    @Override
    public synchronized JobConfig removeJob(final String name)
    {
        final JobConfig job = config.job(name).orElseThrow(() -> new NotFoundException("no job '" + name + "'"));
        final NetreduceConfig next = config.withoutJob(name);
        apply(ConfigDiff.between(config, next), next);
        LOG.info("job {} removed through the API", name);
        return job;
    }

    @Override
    public synchronized List<RingStatus> rings()
    {
        final List<RingStatus> rings = new ArrayList<>();
        for (final JobConfig job : config.jobs())
        {
            for (final RingConfig ring : job.rings())
            {
                rings.add(RingStatus.of(job.name(), ring));
            }
        }
        return rings;
    }

    @Override
    public synchronized Optional<RingStatus> ring(final int ringId)
    {
        return rings().stream().filter(status -> status.ring().id() == ringId).findFirst();
    }

    @Override
    public RingOccupancy occupancy(final int ringId)
    {
        if (ring(ringId).isEmpty())
        {
            throw new NotFoundException("no ring " + ringId);
        }
        throw new UnsupportedOperationException(NO_DATAPLANE);
    }

    @Override
    public List<CltEntry> clt()
    {
        throw new UnsupportedOperationException(NO_DATAPLANE);
    }

    @Override
    public List<CttEntry> ctt()
    {
        throw new UnsupportedOperationException(NO_DATAPLANE);
    }

    @Override
    public List<CounterValue> counters()
    {
        throw new UnsupportedOperationException(NO_DATAPLANE);
    }

    @Override
    public List<LatencySummary> latency()
    {
        throw new UnsupportedOperationException(NO_DATAPLANE);
    }

    @Override
    public ReloadResult reload() throws ConfigException
    {
        // Reading and parsing the file (which may be large or slow) happens outside the lock, so health and reads
        // keep answering; only the check against the running configuration and the apply hold it.
        final NetreduceConfig loaded;
        try
        {
            loaded = source.load();
        }
        catch (final ConfigException ex)
        {
            LOG.error("reload refused, the running configuration stays: {}", ex.getMessage());
            observer.refused(ex);
            throw ex;
        }
        return reload(loaded);
    }

    private synchronized ReloadResult reload(final NetreduceConfig loaded) throws ConfigException
    {
        try
        {
            final ReloadResult result = reloadFromSource(loaded);
            observer.applied(result);
            return result;
        }
        catch (final ConfigException ex)
        {
            LOG.error("reload refused, the running configuration stays: {}", ex.getMessage());
            observer.refused(ex);
            throw ex;
        }
    }

    private ReloadResult reloadFromSource(final NetreduceConfig loaded) throws ConfigException
    {
        // The appliance section (ports, dataplane settings, listen addresses) cannot change under a running dataplane; the
        // jobs are checked against the running appliance, and a changed appliance is reported as needing a restart.
        final NetreduceConfig full = new NetreduceConfig(config.appliance(), loaded.jobs());
        final List<ConfigError> errors = ConfigValidator.validate(full, options);
        if (!errors.isEmpty())
        {
            throw new ConfigException(errors);
        }
        final NetreduceConfig next = served(full);
        final ConfigDiff diff = ConfigDiff.between(config, next);
        apply(diff, next);
        final boolean applianceChanged = !loaded.appliance().equals(config.appliance());
        if (applianceChanged)
        {
            LOG.warn("reload: the appliance section changed; it takes effect only on restart");
        }
        LOG.info("reload: jobs +{} -{}, rings +{} -{} (changed {}), {} unchanged",
            diff.jobsAdded().size(), diff.jobsRemoved().size(), diff.ringsAdded().size(), diff.ringsRemoved().size(),
            diff.ringsChanged().size(), diff.ringsUnchanged().size());
        final ReloadResult result = ReloadResult.of(diff);
        return new ReloadResult(result.jobsAdded(), result.jobsRemoved(), result.ringsAdded(), result.ringsRemoved(),
            result.ringsChanged(), result.ringsUnchanged(), applianceChanged);
    }

    @Override
    public List<CaptureInfo> captures()
    {
        throw new UnsupportedOperationException(NO_DATAPLANE);
    }

    @Override
    public CaptureInfo startCapture(final CaptureRequest request)
    {
        throw new UnsupportedOperationException(NO_DATAPLANE);
    }

    @Override
    public CaptureInfo stopCapture(final String id)
    {
        throw new UnsupportedOperationException(NO_DATAPLANE);
    }

    private void apply(final ConfigDiff diff, final NetreduceConfig next)
    {
        // SwitchML jobs: a changed one is removed and installed again (its pool cannot survive a change of size or
        // workers), as a changed ring is.
        for (final JobConfig job : config.jobs())
        {
            if (job.switchml() != null &&
                !Objects.equals(job.switchml(), next.job(job.name()).map(JobConfig::switchml).orElse(null)))
            {
                installer.removeSwitchMl(job.name());
            }
        }
        for (final RingRef ring : diff.ringsRemoved())
        {
            installer.remove(ring);
        }
        for (final JobConfig job : next.jobs())
        {
            if (job.switchml() != null &&
                !Objects.equals(job.switchml(), config.job(job.name()).map(JobConfig::switchml).orElse(null)))
            {
                installer.installSwitchMl(job.name(), job.switchml());
            }
        }
        for (final RingRef ring : diff.ringsAdded())
        {
            installer.install(ring);
        }
        config = next;
    }
}
