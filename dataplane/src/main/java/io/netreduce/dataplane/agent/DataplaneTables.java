package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.aggregator.AggregatorRegion;
import io.netreduce.dataplane.aggregator.MemoryBudget;
import io.netreduce.dataplane.switchml.SwitchMlJobs;
import io.netreduce.dataplane.clt.AddressPairSet;
import io.netreduce.dataplane.clt.ConnectionTable;
import io.netreduce.dataplane.clt.IpKey;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.counters.RingCounter;
import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.dataplane.ring.Ring;
import io.netreduce.dataplane.ring.RingRuns;
import io.netreduce.dataplane.ring.RingDefinition;
import org.agrona.concurrent.status.AtomicCounter;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * The dataplane's tables: the ring table (indexed by RingID), the CLT and the set of ring edges, plus the
 * aggregator memory budget. Changed only by the dataplane thread, when it applies a control command; the
 * packet path reads the public fields directly.
 */
public final class DataplaneTables implements AutoCloseable
{
    public static final int MAX_RINGS = 256;

    final Ring[] rings = new Ring[MAX_RINGS];
    final ConnectionTable clt;
    private final long abandonedRunNs;
    final AddressPairSet edges;
    private final DataplaneCounters counters;
    private final MemoryBudget memory;
    private final SwitchMlJobs switchMl;

    public DataplaneTables(final int cltEntries, final long memoryBudget, final DataplaneCounters counters)
    {
        this(cltEntries, memoryBudget, counters, RingRuns.DEFAULT_ABANDONED_RUN_NS);
    }

    /**
     * @param abandonedRunNs see {@link Ring#DEFAULT_ABANDONED_RUN_NS}.
     */
    public DataplaneTables(
        final int cltEntries, final long memoryBudget, final DataplaneCounters counters, final long abandonedRunNs)
    {
        this(new ConnectionTable(cltEntries), memoryBudget, counters, abandonedRunNs);
    }

    /**
     * @param clt the connection lookup table (with its foreign share).
     */
    public DataplaneTables(
        final ConnectionTable clt, final long memoryBudget, final DataplaneCounters counters, final long abandonedRunNs)
    {
        this.abandonedRunNs = abandonedRunNs;
        this.clt = clt;
        this.edges = new AddressPairSet(MAX_RINGS * 8);
        this.memory = new MemoryBudget(memoryBudget);
        this.switchMl = new SwitchMlJobs(memory);
        this.counters = counters;
    }

    public Ring ring(final int ringId)
    {
        return rings[ringId & 0xFF];
    }

    public ConnectionTable clt()
    {
        return clt;
    }

    /**
     * @return the ring table itself, indexed by RingID (null where no ring is installed): the packet path reads it
     *         directly, on the dataplane thread.
     */
    public Ring[] rings()
    {
        return rings;
    }

    /**
     * @return the address pairs every installed ring's connections run on.
     */
    public AddressPairSet edges()
    {
        return edges;
    }

    public long memoryUsed()
    {
        return memory.used();
    }

    /**
     * @return the SwitchML jobs (their own package's table, drawing on the same aggregator memory budget).
     */
    public SwitchMlJobs switchMl()
    {
        return switchMl;
    }

    public long memoryBudget()
    {
        return memory.budget();
    }

    /**
     * Install a ring.
     *
     * @throws IllegalArgumentException if the configuration is invalid, the id is taken or the ring does not fit
     *                                  the memory budget; the message says which.
     */
    public RingInstalled install(final RingDefinition config)
    {
        config.validate();
        if (rings[config.ringId()] != null)
        {
            throw alreadyInstalled(config.ringId(), rings[config.ringId()].config().jobName());
        }
        final int summed = config.aggregatedRanks();
        final boolean leaf = config.hierarchy().tier() == Hierarchy.Tier.LEAF;
        requireFits(config, memory.used(), memory.budget());
        final int aggregators = config.aggregatorCount();
        final AggregatorRegion region = AggregatorRegion.allocate(summed, aggregators, config.payloadSize(), leaf);
        final AtomicCounter completed = counters.newRingCounter(config.ringId(), RingCounter.AGGREGATIONS_COMPLETED);
        final AtomicCounter results = counters.newRingCounter(config.ringId(), RingCounter.RESULT_PACKETS);
        final Ring ring = new Ring(config, region, completed, results, abandonedRunNs);
        for (int rank = 0; rank < ring.ranks(); rank++)
        {
            edges.add(ring.sourceHigh(rank), ring.sourceLow(rank), ring.destinationHigh(rank),
                ring.destinationLow(rank));
        }
        if (ring.isLeaf())
        {
            // The entering cross-rack connection carries only the spine's results here: a raw packet on it whose
            // connection is unknown must not reach the rack's first rank as if it were a sum.
            edges.add(ring.incomingSourceHigh(), ring.incomingSourceLow(), ring.incomingDestinationHigh(),
                ring.incomingDestinationLow());
        }
        rings[config.ringId()] = ring;
        memory.take(region.bytes(), "ring " + config.ringId());
        return describe(ring);
    }

    /**
     * @return the refusal of a ring id that is taken (by a ring of job {@code jobName}).
     */
    static IllegalArgumentException alreadyInstalled(final int ringId, final String jobName)
    {
        return new IllegalArgumentException("ring " + ringId + " is already installed (job " + jobName +
            "); remove it first");
    }

    /**
     * @return the aggregator memory a ring takes.
     */
    public static long memoryFor(final RingDefinition config)
    {
        return AggregatorRegion.bytesFor(config.aggregatedRanks(), config.aggregatorCount(), config.payloadSize(),
            config.hierarchy().tier() == Hierarchy.Tier.LEAF);
    }

    /**
     * @return the ring's memory ({@link #memoryFor}).
     * @throws IllegalArgumentException with the arithmetic if the ring does not fit beside {@code used} bytes in
     *                                  {@code budget}.
     */
    static long requireFits(final RingDefinition config, final long used, final long budget)
    {
        final long bytes = memoryFor(config);
        if (used + bytes > budget)
        {
            final boolean leaf = config.hierarchy().tier() == Hierarchy.Tier.LEAF;
            throw new IllegalArgumentException(String.format(
                "ring %d does not fit the aggregator memory budget: it needs %s (2N x MsgLen = %d aggregators of %d " +
                "bytes for %d ranks x %d-byte payloads) but only %s of the %s budget is free",
                config.ringId(), bytesText(bytes), config.aggregatorCount(),
                AggregatorRegion.strideFor(config.aggregatedRanks(), config.payloadSize(), leaf),
                config.aggregatedRanks(), config.payloadSize(), bytesText(budget - used), bytesText(budget)));
        }
        return bytes;
    }

    /**
     * Remove a ring: CLT entries, edges, counters, memory.
     *
     * @throws IllegalArgumentException if no such ring is installed.
     */
    public RingRemoved remove(final int ringId)
    {
        final Ring ring = ringId >= 0 && ringId < MAX_RINGS ? rings[ringId] : null;
        if (ring == null)
        {
            throw new IllegalArgumentException("ring " + ringId + " is not installed");
        }
        rings[ringId] = null;
        final int removed = clt.removeRing(ringId);
        for (int rank = 0; rank < ring.ranks(); rank++)
        {
            edges.remove(ring.sourceHigh(rank), ring.sourceLow(rank), ring.destinationHigh(rank),
                ring.destinationLow(rank));
        }
        if (ring.isLeaf())
        {
            edges.remove(ring.incomingSourceHigh(), ring.incomingSourceLow(), ring.incomingDestinationHigh(),
                ring.incomingDestinationLow());
        }
        removeForeignOffEdges();
        final long bytes = ring.region().bytes();
        memory.release(bytes);
        ring.completedCounter().close();
        ring.resultsCounter().close();
        ring.close();
        return new RingRemoved(ringId, bytes, removed);
    }

    public List<RingInstalled> list()
    {
        final List<RingInstalled> list = new ArrayList<>();
        for (final Ring ring : rings)
        {
            if (ring != null)
            {
                list.add(describe(ring));
            }
        }
        return list;
    }

    public List<ConnectionEntry> connections()
    {
        final List<ConnectionEntry> list = new ArrayList<>();
        for (int slot = 0; slot < clt.capacity(); slot++)
        {
            if (!clt.isUsed(slot))
            {
                continue;
            }
            final boolean foreign = clt.kind(slot) == ConnectionTable.KIND_FOREIGN;
            final boolean down = clt.kind(slot) == ConnectionTable.KIND_DOWN;
            final Ring ring = foreign ? null : rings[clt.ring(slot)];
            final boolean current = down ||
                ring != null && ring.runs().generation(clt.rank(slot)) == clt.generation(slot);
            // Ranks are reported as the INA header has them (global), not as the appliance indexes them.
            final int rank = foreign || ring == null ? -1 : down ? ring.incomingRank() : ring.globalRank(clt.rank(slot));
            list.add(new ConnectionEntry(
                IpKey.toAddress(clt.srcHigh(slot), clt.srcLow(slot)),
                IpKey.toAddress(clt.dstHigh(slot), clt.dstLow(slot)),
                clt.qp(slot), foreign,
                foreign ? -1 : clt.ring(slot), rank,
                clt.msgId(slot), clt.psn0(slot), foreign || current));
        }
        return list;
    }

    /**
     * @throws IllegalArgumentException if no such ring is installed.
     */
    public AggregatorUsage occupancy(final int ringId, final int limit, final long nowNs)
    {
        final Ring ring = ringId >= 0 && ringId < MAX_RINGS ? rings[ringId] : null;
        if (ring == null)
        {
            throw new IllegalArgumentException("ring " + ringId + " is not installed");
        }
        final AggregatorRegion region = ring.region();
        int free = 0;
        int complete = 0;
        final List<PendingAggregator> pending = new ArrayList<>();
        int newest = -1;
        for (int index = 0; index < region.aggregators(); index++)
        {
            final int agg = region.offset(index);
            final int msg = region.boundMsg(agg);
            if (msg == AggregatorRegion.FREE)
            {
                free++;
            }
            else if (region.isComplete(agg))
            {
                complete++;
                newest = newer(newest, msg);
            }
            else
            {
                newest = newer(newest, msg);
                final List<Integer> missing = new ArrayList<>();
                final long arrived = region.arrived(agg);
                for (int rank = 0; rank < ring.ranks(); rank++)
                {
                    if ((arrived & (1L << rank)) == 0)
                    {
                        missing.add(rank);
                    }
                }
                pending.add(new PendingAggregator(msg, index % ring.msgLen(), List.copyOf(missing),
                    nowNs - region.firstArrival(agg)));
            }
        }
        final int reference = newest;
        pending.sort(Comparator
            .comparingInt((PendingAggregator p) -> reference < 0 ? 0 : -(byte)(reference - p.msgId()))
            .thenComparingInt(PendingAggregator::position));
        final int incomplete = pending.size();
        return new AggregatorUsage(ringId, region.aggregators(), free, complete, incomplete,
            List.copyOf(pending.subList(0, Math.min(Math.max(0, limit), incomplete))));
    }

    @Override
    public void close()
    {
        for (int i = 0; i < MAX_RINGS; i++)
        {
            if (rings[i] != null)
            {
                rings[i].close();
                rings[i] = null;
            }
        }
        switchMl.close();
        memory.release(memory.used());
    }

    private static int newer(final int current, final int candidate)
    {
        return current < 0 || (byte)(candidate - current) > 0 ? candidate : current;
    }

    private void removeForeignOffEdges()
    {
        boolean again = true;
        while (again)
        {
            again = false;
            for (int slot = 0; slot < clt.capacity(); slot++)
            {
                if (clt.isUsed(slot) && clt.kind(slot) == ConnectionTable.KIND_FOREIGN &&
                    !edges.contains(clt.srcHigh(slot), clt.srcLow(slot), clt.dstHigh(slot), clt.dstLow(slot)))
                {
                    clt.removeAt(slot);
                    again = true;
                }
            }
        }
    }

    private RingInstalled describe(final Ring ring)
    {
        final AggregatorRegion region = ring.region();
        return new RingInstalled(ring.id(), ring.config().jobName(), region.aggregators(), region.stride(),
            region.bytes(), memory.used(), memory.budget(), 0);
    }

    static String bytesText(final long bytes)
    {
        if (bytes >= 1L << 30)
        {
            return String.format("%.1f GiB", bytes / (double)(1L << 30));
        }
        if (bytes >= 1L << 20)
        {
            return String.format("%.1f MiB", bytes / (double)(1L << 20));
        }
        if (bytes >= 1L << 10)
        {
            return String.format("%.1f KiB", bytes / 1024.0);
        }
        return bytes + " B";
    }
}
