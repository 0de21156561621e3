package io.netreduce.controlplane.config;

import java.util.List;

/**
 * A training job: a named set of NetReduce rings, or a SwitchML job, added and removed together.
 *
 * @param name     the job name, unique in the configuration.
 * @param rings    the job's rings (none for a SwitchML job).
 * @param switchml the job's SwitchML pool and workers; null for a NetReduce job.
 */
public record JobConfig(
    String name,
    List<RingConfig> rings,
    @com.fasterxml.jackson.annotation.JsonInclude(com.fasterxml.jackson.annotation.JsonInclude.Include.NON_NULL)
    SwitchMlJobConfig switchml)
{
    /**
     * A NetReduce job.
     */
    public JobConfig(final String name, final List<RingConfig> rings)
    {
        this(name, rings, null);
    }

    /**
     * Canonical constructor: copies the ring list so the record is immutable.
     */
    public JobConfig
    {
        rings = List.copyOf(rings);
    }

    /**
     * @param applianceName the appliance's name, or null.
     * @return this job with only the rings that appliance has a role in (possibly none); a SwitchML job whole.
     */
    public JobConfig servedBy(final String applianceName)
    {
        return new JobConfig(name, rings.stream().filter(ring -> ring.hierarchyFor(applianceName).isPresent())
            .toList(), switchml);
    }

    /**
     * @return whether this appliance has anything of the job to serve (a ring, or its SwitchML pool).
     */
    public boolean isServed()
    {
        return !rings.isEmpty() || switchml != null;
    }
}
