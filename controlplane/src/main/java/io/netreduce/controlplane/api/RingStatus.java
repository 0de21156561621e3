package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.RingConfig;

/**
 * A configured ring and what it costs.
 *
 * @param job             the job owning the ring.
 * @param ring            the ring's configuration.
 * @param worldSize       the number of ranks.
 * @param aggregatorBytes the aggregator memory budgeted for it.
 */
public record RingStatus(String job, RingConfig ring, int worldSize, long aggregatorBytes)
{
    /**
     * @param job  the job owning the ring.
     * @param ring the ring's configuration.
     * @return the status derived from the configuration.
     */
    public static RingStatus of(final String job, final RingConfig ring)
    {
        return new RingStatus(job, ring, ring.worldSize(), ring.aggregatorBytes());
    }
}
