package io.netreduce.dataplane.ring;

import io.netreduce.protocol.wire.InaHeader;

import io.netreduce.protocol.element.ElementType;
import io.netreduce.dataplane.aggregator.AggregatorRegion;
import io.netreduce.dataplane.clt.IpKey;
import io.netreduce.protocol.icrc.Crc32Combine;
import io.netreduce.protocol.icrc.Icrc;
import org.agrona.concurrent.status.AtomicCounter;

import java.util.Arrays;

/**
 * An installed ring: its configuration unpacked into primitive fields for the packet path, its aggregator
 * region, and per-rank connection state.
 * <p>
 * "Rank" in this class (and in the CLT, the aggregator region and the packet path) is the <em>local</em> rank: the
 * index among the connections this appliance sums. For a flat ring it is the global rank; a leaf sums its rack's
 * ranks (local 0 = the rack's first rank), a spine the racks' leaving cross-rack connections (local k = rack k's;
 * see {@link Hierarchy}). {@link #localRank(int)} and {@link #globalRank(int)} convert from and to the INA header's
 * rank. Each local rank has its connection's source and destination address ({@link #isSource},
 * {@link #isDestination}), which for a flat ring are the member and its successor.
 * <p>
 * Its per-rank state lives in three parts, each with its own rules: {@link #runs()} (runs, and the generation of
 * the connection carrying each rank), {@link #starts()} (where each message of a rank's connection began: go-back-N
 * placement and the retransmission check) and {@link #macs()} (the MAC each rank's first packets must come from).
 * {@link #connect(int, long)} is the one change that touches two of them. Owned by the dataplane thread.
 */
public final class Ring implements AutoCloseable
{
    /** Gradient bytes in a first packet are the payload minus the INA header. */
    public static final int INA_LENGTH = InaHeader.LENGTH;

    private final RingDefinition config;
    private final int id;
    private final int ranks;
    private final int window;
    private final int slots;
    private final int msgLen;
    private final int payloadSize;
    private final ElementType elementType;
    private final long fullMask;
    private final Hierarchy.Tier tier;
    /** Global rank (the INA header's) of each rank this appliance sums: its local rank is the index. */
    private final int[] globalRank;
    /** Local rank of each global rank, or -1 when this appliance does not sum it. */
    private final int[] localRank = new int[256];
    /** Per local rank: the source and destination addresses of its connection, and the destination's receive QP. */
    private final long[] sourceHigh;
    private final long[] sourceLow;
    private final long[] destinationHigh;
    private final long[] destinationLow;
    private final int[] destinationReceiveQp;
    /** A leaf's entering cross-rack connection (previous rack's last rank to this rack's first). */
    private final int incomingRank;
    private final long incomingSourceHigh;
    private final long incomingSourceLow;
    private final long incomingDestinationHigh;
    private final long incomingDestinationLow;
    private final int incomingReceiveQp;
    private final RingRuns runs;
    private final MessageStarts starts;
    private final MacBinding macs;
    /** The run of this (leaf) ring in which its entering cross-rack connection was last learned, or -1. */
    private int downLearnedInRun = -1;
    private final int firstShiftOperator;
    private final int otherShiftOperator;
    private final AggregatorRegion region;
    private final AtomicCounter completed;
    private final AtomicCounter results;
    private final int inetTag;
    private final int resultTag;
    private final int resultTagCrcDelta;
    private final int partialTagCrcDelta;

    public Ring(
        final RingDefinition config,
        final AggregatorRegion region,
        final AtomicCounter completed,
        final AtomicCounter results)
    {
        this(config, region, completed, results, RingRuns.DEFAULT_ABANDONED_RUN_NS);
    }

    /**
     * @param abandonedRunNs how long a run with messages in flight may make no progress before a new connection
     *                       may begin a new run.
     */
    public Ring(
        final RingDefinition config,
        final AggregatorRegion region,
        final AtomicCounter completed,
        final AtomicCounter results,
        final long abandonedRunNs)
    {
        this.config = config;
        this.id = config.ringId();
        this.ranks = config.aggregatedRanks();
        this.window = config.window();
        this.slots = 2 * config.window();
        this.msgLen = config.msgLen();
        this.payloadSize = config.payloadSize();
        this.elementType = config.elementType();
        this.fullMask = ranks == 64 ? -1L : (1L << ranks) - 1;
        final Hierarchy hierarchy = config.hierarchy();
        this.tier = hierarchy.tier();
        final int world = config.worldSize();
        this.globalRank = new int[ranks];
        Arrays.fill(localRank, -1);
        for (int local = 0; local < ranks; local++)
        {
            globalRank[local] = switch (tier)
            {
                case FLAT -> local;
                case LEAF -> hierarchy.rackFirst(hierarchy.rack()) + local;
                // The spine's rank k is rack k's leaving cross-rack connection, sent by the rack's last rank.
                case SPINE -> hierarchy.rackLast(local);
            };
            localRank[globalRank[local]] = local;
        }
        this.sourceHigh = new long[ranks];
        this.sourceLow = new long[ranks];
        this.destinationHigh = new long[ranks];
        this.destinationLow = new long[ranks];
        this.destinationReceiveQp = new int[ranks];
        // One more entry at a leaf: its entering connection's sender, the previous rack's last rank.
        final long[] memberMac = new long[tier == Hierarchy.Tier.LEAF ? ranks + 1 : ranks];
        for (int local = 0; local < ranks; local++)
        {
            final RingMember source = config.member(globalRank[local]);
            final RingMember destination = config.member((globalRank[local] + 1) % world);
            sourceHigh[local] = IpKey.high(source.address());
            sourceLow[local] = IpKey.low(source.address());
            destinationHigh[local] = IpKey.high(destination.address());
            destinationLow[local] = IpKey.low(destination.address());
            destinationReceiveQp[local] = destination.receiveQp();
            memberMac[local] = source.mac();
        }
        if (tier == Hierarchy.Tier.LEAF)
        {
            final int first = globalRank[0];
            incomingRank = (first + world - 1) % world;
            final RingMember source = config.member(incomingRank);
            final RingMember destination = config.member(first);
            incomingSourceHigh = IpKey.high(source.address());
            incomingSourceLow = IpKey.low(source.address());
            incomingDestinationHigh = IpKey.high(destination.address());
            incomingDestinationLow = IpKey.low(destination.address());
            incomingReceiveQp = destination.receiveQp();
            memberMac[ranks] = source.mac();
        }
        else
        {
            incomingRank = -1;
            incomingSourceHigh = 0;
            incomingSourceLow = 0;
            incomingDestinationHigh = 0;
            incomingDestinationLow = 0;
            incomingReceiveQp = RingMember.ANY;
        }
        this.macs = new MacBinding(memberMac);
        this.starts = new MessageStarts(ranks, slots);
        this.runs = new RingRuns(ranks, region, abandonedRunNs);
        this.firstShiftOperator = Crc32Combine.shiftOperator(payloadSize - INA_LENGTH);
        this.otherShiftOperator = Crc32Combine.shiftOperator(payloadSize);
        this.region = region;
        this.completed = completed;
        this.results = results;
        // A spine aggregates leaves' partial sums, which carry the partial tag (see Hierarchy.PARTIAL_TAG).
        this.inetTag = tier == Hierarchy.Tier.SPINE ? Hierarchy.PARTIAL_TAG : config.inetTag();
        this.resultTag = config.resultTag();
        // The tag ends InaHeader.LENGTH - 4 bytes before the gradient: rewriting it changes the stored header's
        // CRC by this constant, applied instead of a second pass over the header.
        final int tagEnd = InaHeader.LENGTH - InaHeader.INET_TAG_OFFSET - Integer.BYTES;
        this.resultTagCrcDelta = Icrc.rewriteDelta(inetTag, resultTag, tagEnd);
        this.partialTagCrcDelta = Icrc.rewriteDelta(inetTag, Hierarchy.PARTIAL_TAG, tagEnd);
    }

    /**
     * @return the InetTag this ring's workers send.
     */
    public int inetTag()
    {
        return inetTag;
    }

    /**
     * @return the InetTag written into this ring's results (the request tag when results are not marked).
     */
    public int resultTag()
    {
        return resultTag;
    }

    /**
     * @return what writing {@link #resultTag()} over {@link #inetTag()} does to the CRC of a first packet's
     *         headers up to the gradient (0 when results are not marked).
     */
    public int resultTagCrcDelta()
    {
        return resultTagCrcDelta;
    }

    /**
     * @return what writing {@link Hierarchy#PARTIAL_TAG} over {@link #inetTag()} does to the CRC of a first packet's
     *         headers up to the gradient (a leaf's partial sums).
     */
    public int partialTagCrcDelta()
    {
        return partialTagCrcDelta;
    }

    public RingDefinition config()
    {
        return config;
    }

    public int id()
    {
        return id;
    }

    public int ranks()
    {
        return ranks;
    }

    public int window()
    {
        return window;
    }

    /**
     * @return 2N, the messages the aggregator array holds.
     */
    public int slots()
    {
        return slots;
    }

    public int msgLen()
    {
        return msgLen;
    }

    public int payloadSize()
    {
        return payloadSize;
    }

    public ElementType elementType()
    {
        return elementType;
    }

    public long fullMask()
    {
        return fullMask;
    }

    public AggregatorRegion region()
    {
        return region;
    }

    public AtomicCounter completedCounter()
    {
        return completed;
    }

    public AtomicCounter resultsCounter()
    {
        return results;
    }

    /**
     * @return whether the address is the source of local rank {@code rank}'s connection (the member of that rank).
     */
    public boolean isSource(final int rank, final long high, final long low)
    {
        return sourceHigh[rank] == high && sourceLow[rank] == low;
    }

    /**
     * @return whether the address is the destination of local rank {@code rank}'s connection (its ring successor).
     */
    public boolean isDestination(final int rank, final long high, final long low)
    {
        return destinationHigh[rank] == high && destinationLow[rank] == low;
    }

    public long sourceHigh(final int rank)
    {
        return sourceHigh[rank];
    }

    public long sourceLow(final int rank)
    {
        return sourceLow[rank];
    }

    public long destinationHigh(final int rank)
    {
        return destinationHigh[rank];
    }

    public long destinationLow(final int rank)
    {
        return destinationLow[rank];
    }

    /**
     * @return the QP on which the destination of local rank {@code rank}'s connection receives ring traffic, or
     *         {@link RingMember#ANY}.
     */
    public int destinationReceiveQp(final int rank)
    {
        return destinationReceiveQp[rank];
    }

    public Hierarchy.Tier tier()
    {
        return tier;
    }

    public boolean isLeaf()
    {
        return tier == Hierarchy.Tier.LEAF;
    }

    /**
     * @return the local rank of a global rank (the INA header's), or -1 when this appliance does not sum it.
     */
    public int localRank(final int globalRank)
    {
        return localRank[globalRank & 0xFF];
    }

    /**
     * @return the global rank (the INA header's) of local rank {@code rank}.
     */
    public int globalRank(final int rank)
    {
        return globalRank[rank];
    }

    /**
     * @return whether local rank {@code rank}'s connection carries the leaf's partial sum up: the rack's leaving
     *         cross-rack connection, sent by the rack's last rank.
     */
    public boolean sendsUp(final int rank)
    {
        return tier == Hierarchy.Tier.LEAF && rank == ranks - 1;
    }

    /**
     * @return a leaf's entering cross-rack connection's sender (the previous rack's last rank), or -1.
     */
    public int incomingRank()
    {
        return incomingRank;
    }

    /**
     * @return whether the addresses and QP are a leaf's entering cross-rack connection.
     */
    public boolean isIncoming(final long srcHigh, final long srcLow, final long dstHigh, final long dstLow, final int qp)
    {
        return tier == Hierarchy.Tier.LEAF && incomingSourceHigh == srcHigh && incomingSourceLow == srcLow &&
            incomingDestinationHigh == dstHigh && incomingDestinationLow == dstLow &&
            (incomingReceiveQp == RingMember.ANY || incomingReceiveQp == qp);
    }

    public long incomingSourceHigh()
    {
        return incomingSourceHigh;
    }

    public long incomingSourceLow()
    {
        return incomingSourceLow;
    }

    public long incomingDestinationHigh()
    {
        return incomingDestinationHigh;
    }

    public long incomingDestinationLow()
    {
        return incomingDestinationLow;
    }

    /**
     * @return the ring's runs and the generations of the connections carrying its ranks.
     */
    public RingRuns runs()
    {
        return runs;
    }

    /**
     * @return where each message of each rank's connection (and a leaf's entering connection) began.
     */
    public MessageStarts starts()
    {
        return starts;
    }

    /**
     * @return the MAC each rank's packets (and a leaf's spine results) must come from.
     */
    public MacBinding macs()
    {
        return macs;
    }

    /**
     * @return the run ({@link RingRuns#run()}) in which this leaf's entering cross-rack connection was last learned,
     *         or -1 if never.
     */
    public int downLearnedInRun()
    {
        return downLearnedInRun;
    }

    /**
     * This leaf's entering cross-rack connection was learned (again) now, in the current run.
     */
    public void downLearned()
    {
        downLearnedInRun = runs.run();
    }

    /**
     * @return a leaf's index in {@link #macs()} of its entering cross-rack connection (the spine's results, sent
     *         with the previous rack's last rank's MAC).
     */
    public int downMacIndex()
    {
        return ranks;
    }

    /**
     * A new connection now carries {@code rank}: the rank's message start records are forgotten and the connection
     * joins, takes over or begins a run ({@link RingRuns#connect(int, long)}, whose answer this returns).
     */
    public int connect(final int rank, final long nowNs)
    {
        starts.forgetRank(rank);
        return runs.connect(rank, nowNs);
    }

    /**
     * @return the aggregator index of position {@code position} of message {@code msgId}:
     * {@code MsgID % 2N * MsgLen + position}.
     */
    public int aggregatorIndex(final int msgId, final int position)
    {
        return (msgId & (slots - 1)) * msgLen + position;
    }

    /**
     * @return bytes of gradient data a packet at {@code position} carries.
     */
    public int gradientLength(final int position)
    {
        return position == 0 ? payloadSize - INA_LENGTH : payloadSize;
    }

    /**
     * @return the CRC-32 shift operator over {@link #gradientLength(int)} bytes.
     */
    public int shiftOperator(final int position)
    {
        return position == 0 ? firstShiftOperator : otherShiftOperator;
    }

    @Override
    public void close()
    {
        region.close();
    }
}
