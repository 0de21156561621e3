package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.RingConfig;

/**
 * A configured ring and what it costs.
 *
 * @param job             the job owning the ring.
 * @param ring            the ring's configuration.
 * @param worldSize       the number of ranks.
 * @param aggregatorBytes the aggregator memory budgeted for it.
 * @param lane            the dataplane lane that owns it, or {@link #NO_LANE} when not installed (or not known).
 */
public record RingStatus(String job, RingConfig ring, int worldSize, long aggregatorBytes, int lane)
{
    /** {@link #lane()} of a ring no lane owns. */
    public static final int NO_LANE = -1;

    /**
     * @return this status with the lane that owns the ring.
     */
    public RingStatus onLane(final int lane)
    {
        return new RingStatus(job, ring, worldSize, aggregatorBytes, lane);
    }

    /**
     * @param job  the job owning the ring.
     * @param ring the ring's configuration.
     * @return the status derived from the configuration.
     */
    public static RingStatus of(final String job, final RingConfig ring)
    {
        return new RingStatus(job, ring, ring.worldSize(), ring.aggregatorBytes(), NO_LANE);
    }
}
