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
 */
public record RingInstalled(
    int ringId,
    String jobName,
    int aggregators,
    int aggregatorBytes,
    long memoryBytes,
    long budgetUsedBytes,
    long budgetBytes)
{
}
