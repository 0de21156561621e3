package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.ConfigException;
import io.netreduce.controlplane.config.JobConfig;

import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * What the control API and CLI can ask of the appliance. The HTTP layer is written against this interface only;
 * the daemon supplies an implementation backed by the dataplane (tables, counters and histograms the dataplane
 * publishes, commands through its bounded queue). Every answer is a plain data record, safe to serialise.
 * <p>
 * An implementation that cannot answer a query (e.g. no dataplane attached) throws
 * {@link UnsupportedOperationException}; the API maps it to 501 rather than inventing data.
 */
public interface ApplianceControl
{
    /**
     * @return the configured jobs, in configuration order.
     */
    List<JobConfig> listJobs();

    /**
     * @param name a job name.
     * @return the job, if configured.
     */
    Optional<JobConfig> job(String name);

    /**
     * Add a job and install its rings.
     *
     * @param job the job, already parsed.
     * @return the job as installed.
     * @throws ConfigException   if the running configuration plus the job is invalid (ring id in use, over budget).
     * @throws ConflictException if a job of that name exists.
     */
    JobConfig addJob(JobConfig job) throws ConfigException;

    /**
     * Remove a job and its rings.
     *
     * @param name the job name.
     * @return the removed job.
     * @throws NotFoundException if there is no such job.
     */
    JobConfig removeJob(String name);

    /**
     * @return every ring of every job.
     */
    List<RingStatus> rings();

    /**
     * @param ringId a ring id.
     * @return the ring, if configured.
     */
    Optional<RingStatus> ring(int ringId);

    /**
     * @param ringId a ring id.
     * @return for the oldest incomplete aggregators of the ring, which ranks have and have not contributed.
     * @throws NotFoundException if there is no such ring.
     */
    RingOccupancy occupancy(int ringId);

    /**
     * @return the connection lookup table: one entry per connection the dataplane has learned.
     */
    List<CltEntry> clt();

    /**
     * @return the connection translation table: the entries of the multi-rack rings this appliance serves (their
     *         virtual switch-to-switch connections, with what the CLT has learned of them); empty without any.
     */
    List<CttEntry> ctt();

    /**
     * @return the SwitchML jobs installed (from the configuration and opened through the controller), with what
     *         their pools have done.
     */
    default List<SwitchMlJobStatus> switchMlJobs()
    {
        throw new UnsupportedOperationException("no dataplane attached to this control plane");
    }

    /**
     * @return every counter: its Prometheus series (the stable key), description and value.
     */
    List<CounterValue> counters();

    /**
     * @return latency percentiles of each histogram the dataplane keeps.
     */
    List<LatencySummary> latency();

    /**
     * Reload the configuration from its source and apply the difference: rings that did not change are left alone.
     *
     * @return what changed.
     * @throws ConfigException if the new configuration is invalid; the running one stays.
     */
    ReloadResult reload() throws ConfigException;

    /**
     * @return the captures running or finished.
     */
    List<CaptureInfo> captures();

    /**
     * Start a pcap capture of a port or of dropped frames.
     *
     * @param request what to capture and where to write it.
     * @return the capture.
     */
    CaptureInfo startCapture(CaptureRequest request);

    /**
     * Stop a capture and close its file.
     *
     * @param id the capture id.
     * @return the capture's final state.
     * @throws NotFoundException if there is no such capture.
     */
    CaptureInfo stopCapture(String id);
}
