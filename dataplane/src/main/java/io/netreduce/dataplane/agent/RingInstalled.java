package io.netreduce.dataplane.agent;

/**
 * Reply to an install: what the ring costs.
 *
 * @param ringId          the ring.
 * @param jobName         its job.
 * @param aggregators     2N x MsgLen.
 * @param aggregatorBytes bytes per aggregator (W payloads, W headers, the result, state).
 * @param memoryBytes     bytes of the ring's off-heap region.
 * @param budgetUsedBytes aggregator memory in use by all rings after the install.
 * @param budgetBytes     the configured aggregator memory budget.
 * @param lane            the dataplane lane that owns the ring (its agent is the ring's single writer).
 */
public record RingInstalled(
    int ringId,
    String jobName,
    int aggregators,
    int aggregatorBytes,
    long memoryBytes,
    long budgetUsedBytes,
    long budgetBytes,
    int lane)
{
    /**
     * @return this reply as the whole dataplane sees it: on {@code lane}, with {@code usedBytes} of the budget used
     *         by the rings of every lane.
     */
    public RingInstalled onLane(final int lane, final long usedBytes)
    {
        return new RingInstalled(ringId, jobName, aggregators, aggregatorBytes, memoryBytes, usedBytes, budgetBytes,
            lane);
    }
}
