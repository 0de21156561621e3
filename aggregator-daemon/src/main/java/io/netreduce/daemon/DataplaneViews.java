package io.netreduce.daemon;

import io.netreduce.controlplane.api.CltEntry;
import io.netreduce.controlplane.api.CttEntry;
import io.netreduce.controlplane.api.LatencySummary;
import io.netreduce.controlplane.api.RingOccupancy;
import io.netreduce.controlplane.api.RingStatus;
import io.netreduce.dataplane.agent.AggregatorUsage;
import io.netreduce.dataplane.agent.ConnectionEntry;
import io.netreduce.dataplane.agent.PendingAggregator;
import org.HdrHistogram.Histogram;

import java.util.ArrayList;
import java.util.List;

import static io.netreduce.daemon.CommandReplies.await;
import static io.netreduce.daemon.PacketDataplane.OCCUPANCY_LIMIT;

/**
 * The dataplane's tables as the API shows them, each from a snapshot command answered by the lanes: the CLT, the
 * CTT of the multi-rack rings, a ring's occupancy, and the latency percentiles.
 */
final class DataplaneViews
{
    private final LaneRunners lanes;
    private final DataplaneRingInstaller installer;

    DataplaneViews(final LaneRunners lanes, final DataplaneRingInstaller installer)
    {
        this.lanes = lanes;
        this.installer = installer;
    }

    /**
     * @param worldSize the ring's W, for the ranks that have arrived.
     * @return the ring's oldest incomplete aggregators and the ranks they wait for.
     */
    RingOccupancy occupancy(final int ringId, final int worldSize)
    {
        final AggregatorUsage snapshot =
            await(lanes.proxy().occupancy(ringId, OCCUPANCY_LIMIT), "occupancy of ring " + ringId);
        final List<RingOccupancy.AggregatorOccupancy> incomplete = new ArrayList<>();
        for (final PendingAggregator pending : snapshot.oldest())
        {
            final List<Integer> arrived = new ArrayList<>();
            for (int rank = 0; rank < worldSize; rank++)
            {
                if (!pending.missingRanks().contains(rank))
                {
                    arrived.add(rank);
                }
            }
            incomplete.add(new RingOccupancy.AggregatorOccupancy(
                pending.msgId(), pending.position(), arrived, pending.missingRanks(), pending.ageNanos()));
        }
        return new RingOccupancy(ringId, worldSize, incomplete);
    }

    /**
     * @return the connection lookup table, as the dataplane has learned it (foreign entries without ring and rank).
     */
    List<CltEntry> clt()
    {
        final List<CltEntry> entries = new ArrayList<>();
        for (final ConnectionEntry entry : await(lanes.proxy().connections(), "CLT snapshot"))
        {
            entries.add(new CltEntry(entry.source().getHostAddress(), entry.destination().getHostAddress(),
                entry.destQp(), entry.foreign() ? -1 : entry.ringId(), entry.foreign() ? -1 : entry.rank(),
                entry.msgId(), entry.psn0()));
        }
        return entries;
    }

    /**
     * The CTT as the control plane sees it: the multi-rack rings installed, their entries from the topology, and
     * what the CLT has learned of each entry's connection (current ring and DOWN entries only: a stale entry is a
     * connection that was replaced, a foreign one is no ring's).
     */
    List<CttEntry> ctt(final List<RingStatus> rings)
    {
        final List<RingStatus> multiRack = rings.stream().filter(status -> status.ring().isMultiRack()).toList();
        if (multiRack.isEmpty())
        {
            return List.of();
        }
        final List<CltEntry> learned = new ArrayList<>();
        for (final ConnectionEntry entry : await(lanes.proxy().connections(), "CLT snapshot"))
        {
            if (!entry.foreign() && entry.current())
            {
                learned.add(new CltEntry(entry.source().getHostAddress(), entry.destination().getHostAddress(),
                    entry.destQp(), entry.ringId(), entry.rank(), entry.msgId(), entry.psn0()));
            }
        }
        return CttEntry.of(multiRack, installer.applianceName(), learned);
    }

    /**
     * @return the aggregation latency's percentiles.
     */
    List<LatencySummary> latency()
    {
        final Histogram histogram = lanes.proxy().latency();
        return List.of(new LatencySummary("aggregation", "", -1, histogram.getTotalCount(),
            histogram.getValueAtPercentile(50), histogram.getValueAtPercentile(90),
            histogram.getValueAtPercentile(99), histogram.getValueAtPercentile(99.9), histogram.getMaxValue()));
    }
}
