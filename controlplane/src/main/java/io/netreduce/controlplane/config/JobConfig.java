package io.netreduce.controlplane.config;

import java.util.List;

/**
 * A training job: a named set of rings that are added and removed together.
 *
 * @param name  the job name, unique in the configuration.
 * @param rings the job's rings.
 */
public record JobConfig(String name, List<RingConfig> rings)
{
    /**
     * Canonical constructor: copies the ring list so the record is immutable.
     */
    public JobConfig
    {
        rings = List.copyOf(rings);
    }

    /**
     * @param applianceName the appliance's name, or null.
     * @return this job with only the rings that appliance has a role in (possibly none).
     */
    public JobConfig servedBy(final String applianceName)
    {
        return new JobConfig(name, rings.stream().filter(ring -> ring.hierarchyFor(applianceName).isPresent())
            .toList());
    }
}
