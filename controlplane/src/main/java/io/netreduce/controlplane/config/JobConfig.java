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
}
