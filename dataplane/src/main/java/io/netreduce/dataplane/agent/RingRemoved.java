package io.netreduce.dataplane.agent;

/**
 * Reply to a remove.
 *
 * @param ringId             the ring.
 * @param memoryBytesFreed   bytes of aggregator memory released.
 * @param connectionsRemoved CLT entries that pointed at the ring.
 */
public record RingRemoved(int ringId, long memoryBytesFreed, int connectionsRemoved)
{
}
