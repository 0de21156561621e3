package io.netreduce.daemon;

import io.netreduce.controlplane.api.ApplianceControl;
import io.netreduce.controlplane.api.CaptureInfo;
import io.netreduce.controlplane.api.CaptureRequest;
import io.netreduce.controlplane.api.CltEntry;
import io.netreduce.controlplane.api.SwitchMlJobStatus;
import io.netreduce.controlplane.api.ConfiguredAppliance;
import io.netreduce.controlplane.api.CounterValue;
import io.netreduce.controlplane.api.CttEntry;
import io.netreduce.controlplane.api.LatencySummary;
import io.netreduce.controlplane.api.NotFoundException;
import io.netreduce.controlplane.api.ReloadResult;
import io.netreduce.controlplane.api.RingOccupancy;
import io.netreduce.controlplane.api.RingStatus;
import io.netreduce.controlplane.config.ConfigException;
import io.netreduce.controlplane.config.JobConfig;
import io.netreduce.daemon.capture.CaptureManager;

import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * The API's view: configuration operations go to the configured appliance (which sends ring changes through
 * {@link PacketDataplane#installer()}), table and counter queries to the dataplane.
 */
final class DataplaneControl implements ApplianceControl
{
    private final DataplaneSwitchMl switchMl;
    private final ConfiguredAppliance configured;
    private final LaneRunners lanes;
    private final DataplaneViews tables;
    private final DataplaneMetrics metrics;
    private final Supplier<CaptureManager> captures;

    /**
     * @param captures the capture manager, null until the dataplane has started.
     */
    DataplaneControl(
        final ConfiguredAppliance configured, final LaneRunners lanes, final DataplaneViews tables,
        final DataplaneMetrics metrics, final Supplier<CaptureManager> captures, final DataplaneSwitchMl switchMl)
    {
        this.switchMl = switchMl;
        this.configured = configured;
        this.lanes = lanes;
        this.tables = tables;
        this.metrics = metrics;
        this.captures = captures;
    }

    @Override
    public List<SwitchMlJobStatus> switchMlJobs()
    {
        return switchMl.statuses();
    }

    @Override
    public List<JobConfig> listJobs()
    {
        return configured.listJobs();
    }

    @Override
    public Optional<JobConfig> job(final String name)
    {
        return configured.job(name);
    }

    @Override
    public JobConfig addJob(final JobConfig job)
        throws ConfigException
    {
        return configured.addJob(job);
    }

    @Override
    public JobConfig removeJob(final String name)
    {
        return configured.removeJob(name);
    }

    @Override
    public List<RingStatus> rings()
    {
        return configured.rings().stream().map(this::withLane).toList();
    }

    private RingStatus withLane(final RingStatus status)
    {
        return !lanes.isStarted() ? status : status.onLane(lanes.proxy().laneOf(status.ring().id()));
    }

    @Override
    public Optional<RingStatus> ring(final int ringId)
    {
        return configured.ring(ringId).map(this::withLane);
    }

    @Override
    public RingOccupancy occupancy(final int ringId)
    {
        final int worldSize = configured.ring(ringId)
            .orElseThrow(() -> new NotFoundException("no ring " + ringId)).worldSize();
        return tables.occupancy(ringId, worldSize);
    }

    @Override
    public List<CltEntry> clt()
    {
        return tables.clt();
    }

    @Override
    public List<CttEntry> ctt()
    {
        return tables.ctt(configured.rings());
    }

    @Override
    public List<CounterValue> counters()
    {
        return metrics.counters();
    }

    @Override
    public List<LatencySummary> latency()
    {
        return tables.latency();
    }

    @Override
    public ReloadResult reload() throws ConfigException
    {
        return configured.reload();
    }

    @Override
    public List<CaptureInfo> captures()
    {
        return captureManager().list();
    }

    @Override
    public CaptureInfo startCapture(final CaptureRequest request)
    {
        return captureManager().start(request);
    }

    @Override
    public CaptureInfo stopCapture(final String id)
    {
        return captureManager().stop(id);
    }

    private CaptureManager captureManager()
    {
        final CaptureManager captures = this.captures.get();
        if (captures == null)
        {
            throw new IllegalStateException("dataplane not started");
        }
        return captures;
    }
}
