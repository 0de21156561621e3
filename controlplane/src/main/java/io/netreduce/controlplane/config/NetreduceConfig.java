package io.netreduce.controlplane.config;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A whole netreduce configuration: the appliance and its jobs.
 *
 * @param appliance the appliance-wide settings.
 * @param jobs      the jobs, in configuration order.
 */
public record NetreduceConfig(ApplianceConfig appliance, List<JobConfig> jobs)
{
    /**
     * Canonical constructor: copies the job list so the record is immutable.
     */
    public NetreduceConfig
    {
        jobs = List.copyOf(jobs);
    }

    /**
     * @param name a job name.
     * @return the job of that name, if any.
     */
    public Optional<JobConfig> job(final String name)
    {
        return jobs.stream().filter(job -> job.name().equals(name)).findFirst();
    }

    /**
     * @param job a job to append.
     * @return a copy of this configuration with the job appended (not validated).
     */
    public NetreduceConfig withJob(final JobConfig job)
    {
        final List<JobConfig> newJobs = new ArrayList<>(jobs);
        newJobs.add(job);
        return new NetreduceConfig(appliance, newJobs);
    }

    /**
     * @param name the job to drop.
     * @return a copy of this configuration without that job.
     */
    public NetreduceConfig withoutJob(final String name)
    {
        return new NetreduceConfig(appliance, jobs.stream().filter(job -> !job.name().equals(name)).toList());
    }

    /**
     * @param name this appliance's name (the daemon's {@code --name}).
     * @return a copy of this configuration under that name (not validated).
     */
    public NetreduceConfig withApplianceName(final String name)
    {
        return new NetreduceConfig(appliance.withName(name), jobs);
    }

    /**
     * What this appliance aggregates of the configuration: one topology file describes a multi-rack job for all of
     * its appliances, and each installs only the rings it has a role in ({@link RingConfig#hierarchyFor}, by
     * {@code appliance.name}). Flat rings are always kept; a job left without rings is left out.
     *
     * @return the configuration this appliance serves.
     */
    public NetreduceConfig served()
    {
        final List<JobConfig> served = new ArrayList<>();
        for (final JobConfig job : jobs)
        {
            final JobConfig mine = job.servedBy(appliance.name());
            if (mine.isServed())
            {
                served.add(mine);
            }
        }
        return new NetreduceConfig(appliance, served);
    }

    /**
     * @return total aggregator bytes budgeted over all rings and SwitchML pools of all jobs.
     */
    public long aggregatorBytes()
    {
        long total = 0;
        for (final JobConfig job : jobs)
        {
            for (final RingConfig ring : job.rings())
            {
                total += ring.aggregatorBytes();
            }
            if (job.switchml() != null)
            {
                total += job.switchml().aggregatorBytes();
            }
        }
        return total;
    }
}
