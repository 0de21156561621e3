package io.netreduce.controlplane.config;

/**
 * The aggregator memory a ring is budgeted, used to check a configuration against {@code appliance.memoryBudget}.
 * <p>
 * This is the control plane's estimate for admission only. The dataplane sizes its aggregator arrays itself
 * (alignment, exact header lengths); its figure may differ slightly, which is why the header room is generous.
 * Keep this the single place the estimate lives.
 */
public final class AggregatorMemory
{
    /**
     * Bytes kept per rank per aggregator besides the payload: the rank's packet headers (Ethernet, IP, UDP, BTH,
     * RETH, INA, ImmDt, ICRC), which the result packet on that rank's connection reuses, rounded up generously.
     */
    public static final int HEADER_ROOM = 128;
    /** Bytes per aggregator of bookkeeping: arrival bitmap, count, PSN, MsgID, state. */
    public static final int METADATA = 64;

    private AggregatorMemory()
    {
    }

    /**
     * Memory of one ring: {@code 2 * window * msgLen} aggregators, each holding every rank's payload and headers
     * (buffered aggregation, so the sum is done in rank order), the summed result and the bookkeeping.
     *
     * @param worldSize   ranks in the ring.
     * @param window      N, messages in flight per rank.
     * @param msgLen      packets per message.
     * @param payloadSize payload bytes per packet.
     * @return bytes = 2 * window * msgLen * (worldSize * (payloadSize + HEADER_ROOM) + payloadSize + METADATA).
     */
    public static long bytesPerRing(final int worldSize, final int window, final int msgLen, final int payloadSize)
    {
        final long aggregators = 2L * window * msgLen;
        final long perAggregator = (long)worldSize * (payloadSize + HEADER_ROOM) + payloadSize + METADATA;
        return aggregators * perAggregator;
    }
}
