package io.netreduce.dataplane.agent;

import java.util.List;

/**
 * How a ring's aggregator array is used at the moment of the snapshot.
 *
 * @param ringId      the ring.
 * @param aggregators 2N x MsgLen.
 * @param free        aggregators holding no message.
 * @param complete    aggregators holding a result (kept until every rank has moved one window further).
 * @param incomplete  aggregators waiting for packets.
 * @param oldest      the incomplete aggregators, oldest message first, at most the number asked for.
 */
public record AggregatorUsage(
    int ringId, int aggregators, int free, int complete, int incomplete, List<PendingAggregator> oldest)
{
}
