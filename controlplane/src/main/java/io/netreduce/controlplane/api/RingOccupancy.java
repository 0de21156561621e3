package io.netreduce.controlplane.api;

import java.util.List;

/**
 * The "why is it stuck" view of a ring: its oldest incomplete aggregators and who has not contributed.
 *
 * @param ringId      the ring.
 * @param worldSize   ranks in the ring.
 * @param incomplete  the oldest incomplete aggregators, oldest first.
 */
public record RingOccupancy(int ringId, int worldSize, List<AggregatorOccupancy> incomplete)
{
    /**
     * Canonical constructor: copies the list so the record is immutable.
     */
    public RingOccupancy
    {
        incomplete = List.copyOf(incomplete);
    }

    /**
     * One aggregator waiting for contributions.
     *
     * @param msgId        the message id (8 bits).
     * @param packetIndex  the packet's position in the message (PSN - PSN0).
     * @param arrivedRanks ranks whose packet is in.
     * @param missingRanks ranks the aggregator still waits for.
     * @param ageNanos     time since the first packet arrived.
     */
    public record AggregatorOccupancy(
        int msgId, int packetIndex, List<Integer> arrivedRanks, List<Integer> missingRanks, long ageNanos)
    {
        /**
         * Canonical constructor: copies the lists so the record is immutable.
         */
        public AggregatorOccupancy
        {
            arrivedRanks = List.copyOf(arrivedRanks);
            missingRanks = List.copyOf(missingRanks);
        }
    }
}
