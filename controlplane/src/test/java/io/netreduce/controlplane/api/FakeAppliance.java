package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.ConfigException;
import io.netreduce.controlplane.config.JobConfig;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.ValidationOptions;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A test double below the API boundary: job operations go to a real {@link ConfiguredAppliance}; the dataplane
 * views (counters, CLT, occupancy, latency, captures) answer with what the test put in.
 */
final class FakeAppliance implements ApplianceControl
{
    final ConfiguredAppliance jobs;
    final List<CounterValue> counters = new java.util.ArrayList<>();
    final List<CltEntry> clt = new ArrayList<>();
    final List<CttEntry> ctt = new ArrayList<>();
    final Map<Integer, RingOccupancy> occupancy = new LinkedHashMap<>();
    final List<LatencySummary> latency = new ArrayList<>();
    final Map<String, CaptureInfo> captures = new LinkedHashMap<>();
    int reloads;

    FakeAppliance(final NetreduceConfig initial, final ConfigSource source)
    {
        this.jobs = new ConfiguredAppliance(initial, source, RingInstaller.NONE, ValidationOptions.DOCUMENT_ONLY);
    }

    @Override
    public List<JobConfig> listJobs()
    {
        return jobs.listJobs();
    }

    @Override
    public Optional<JobConfig> job(final String name)
    {
        return jobs.job(name);
    }

    @Override
    public JobConfig addJob(final JobConfig job) throws ConfigException
    {
        return jobs.addJob(job);
    }

    @Override
    public JobConfig removeJob(final String name)
    {
        return jobs.removeJob(name);
    }

    @Override
    public List<RingStatus> rings()
    {
        return jobs.rings();
    }

    @Override
    public Optional<RingStatus> ring(final int ringId)
    {
        return jobs.ring(ringId);
    }

    @Override
    public RingOccupancy occupancy(final int ringId)
    {
        final RingOccupancy answer = occupancy.get(ringId);
        if (answer == null)
        {
            throw new NotFoundException("no ring " + ringId);
        }
        return answer;
    }

    @Override
    public List<CltEntry> clt()
    {
        return clt;
    }

    @Override
    public List<CttEntry> ctt()
    {
        return ctt;
    }

    @Override
    public List<CounterValue> counters()
    {
        return counters;
    }

    @Override
    public List<LatencySummary> latency()
    {
        if (latency.isEmpty())
        {
            throw new UnsupportedOperationException("no histograms in this fake");
        }
        return latency;
    }

    @Override
    public ReloadResult reload() throws ConfigException
    {
        reloads++;
        return jobs.reload();
    }

    @Override
    public List<CaptureInfo> captures()
    {
        return List.copyOf(captures.values());
    }

    @Override
    public CaptureInfo startCapture(final CaptureRequest request)
    {
        final String id = "c" + (captures.size() + 1);
        final CaptureInfo info = new CaptureInfo(id, request.port(), request.drops(), request.file(), 0, true, 0,
            request.maxPackets(), null, null);
        captures.put(id, info);
        return info;
    }

    @Override
    public CaptureInfo stopCapture(final String id)
    {
        final CaptureInfo info = captures.get(id);
        if (info == null)
        {
            throw new NotFoundException("no capture '" + id + "'");
        }
        final CaptureInfo stopped = new CaptureInfo(id, info.port(), info.drops(), info.file(), 42, false, 0,
            info.maxPackets(), null, null);
        captures.put(id, stopped);
        return stopped;
    }
}
