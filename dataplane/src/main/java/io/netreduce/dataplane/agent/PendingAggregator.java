package io.netreduce.dataplane.agent;

import java.util.List;

/**
 * An aggregator that is waiting for packets.
 *
 * @param msgId        the message it holds.
 * @param position     packet position in the message (PSN - PSN0).
 * @param missingRanks ranks whose packet has not arrived, ascending.
 * @param ageNanos     time since its first packet arrived.
 */
public record PendingAggregator(int msgId, int position, List<Integer> missingRanks, long ageNanos)
{
}
