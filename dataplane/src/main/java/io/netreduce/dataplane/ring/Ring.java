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
 * Per rank and per array slot (MsgID % 2N) the ring records the MsgID and PSN0 of the message the rank's
 * connection last started in that slot, so that a packet retransmitted from the middle of an older message
 * (go-back-N, after the CLT has moved on to a newer message) still finds its message and position, and the CRC of
 * that first packet's gradient bytes, so that a first packet on the sequence with other bytes is known not to be
 * a retransmission. Per rank
 * it also records the generation of the connection currently carrying the rank, so that packets of a
 * superseded connection (the worker re-created its QP) are recognised.
 * <p>
 * A ring is used by a sequence of <em>runs</em>: each run is one connection per rank (workers make new QPs for
 * each all-reduce, and MsgIDs start again at 0). A rank that connects again while its current connection already
 * belongs to the current run begins a new run: the previous run is over (see {@link #connect(int, long)}), and its
 * aggregators must be discarded, or the results it kept for retransmissions would answer, or block, the new
 * run's messages with the same MsgID.
 * <p>
 * Until a run has completed its first sum, no connection of it has proven anything (no MAC is bound on a fresh
 * ring, and a stranger's frame with a member's addresses looks like the member's first packet): another connection
 * of a rank may then take the rank over within the run ({@link #REPLACED}), and the one it displaced may take it
 * back. From the first completed sum on, the run's connections are protected ({@link #mayConnect}). Owned by the
 * dataplane thread.
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
    private final long[] memberMac;
    /** A leaf's entering cross-rack connection (previous rack's last rank to this rack's first). */
    private final int incomingRank;
    private final long incomingSourceHigh;
    private final long incomingSourceLow;
    private final long incomingDestinationHigh;
    private final long incomingDestinationLow;
    private final int incomingReceiveQp;
    /** A leaf's record, per array slot, of the MsgID and PSN0 of the spine result last started on its entering connection. */
    private final int[] downSlotMsg;
    private final int[] downSlotPsn0;
    private final int[] generation;
    /** Per rank, the generation of its first connection in its current run. */
    private final int[] runFirstGeneration;
    private final int[] rankRun;
    private int run;
    /** Whether the current run has completed a sum. */
    private boolean runHasSum;
    private final int[] slotMsg;
    private final int[] slotPsn0;
    private final int[] slotCrc;
    private final int firstShiftOperator;
    private final int otherShiftOperator;
    private final AggregatorRegion region;
    private final AtomicCounter completed;
    private final AtomicCounter results;
    /**
     * The default of how long a ring may see no aggregation progress while messages are in flight before its run
     * counts as abandoned (a job killed mid-call): only then may a new connection begin a new run without the old
     * one having finished. Longer than a live run's pauses (RC timeouts of a lossy link are milliseconds to about a
     * second), shorter than a new job's RC retry span, so the next job gets in on its retries.
     */
    public static final long DEFAULT_ABANDONED_RUN_NS = 2_000_000_000L;

    private final long abandonedRunNs;

    /**
     * Completed sums in a row a rank's connection must take part in with one source MAC before that MAC is bound:
     * the Ethernet header is not covered by the ICRC, so one stray or forged frame that happens to complete a sum
     * must not lock the member out.
     */
    public static final int MAC_BINDING_SUMS = 8;

    /** {@link #connect(int, long)}: the connection joins the current run (the rank had no connection in it). */
    public static final int JOINED = 0;
    /** {@link #connect(int, long)}: the connection begins a new run; the caller must discard the ring's aggregators. */
    public static final int NEW_RUN = 1;
    /**
     * {@link #connect(int, long)}: the connection takes its rank over within a run that has completed no sum; the
     * caller must discard the run's partial sums (they may hold the displaced connection's gradients) and not sum
     * the packet in hand: the rank's next packets are summed.
     */
    public static final int REPLACED = 2;
    /**
     * {@link #connect(int, long)}: the connection joins a run that has completed no sum and made no progress for
     * the abandoned-run time; the caller must discard the run's partial sums (they may be a killed job's) and sum
     * the packet in hand. The run's other connections stay: if they are alive, their go-back-N resends put their
     * contributions back.
     */
    public static final int JOINED_ABANDONED = 3;

    private final long[] boundMac;
    private final long[] candidateMac;
    private final int[] candidateSums;
    private long lastProgressNs;
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
        this(config, region, completed, results, DEFAULT_ABANDONED_RUN_NS);
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
        this.abandonedRunNs = abandonedRunNs;
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
        this.memberMac = new long[ranks];
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
        this.downSlotMsg = new int[slots];
        this.downSlotPsn0 = new int[slots];
        Arrays.fill(downSlotMsg, -1);
        this.boundMac = memberMac.clone();
        this.candidateMac = new long[ranks];
        this.candidateSums = new int[ranks];
        this.generation = new int[ranks];
        this.runFirstGeneration = new int[ranks];
        this.rankRun = new int[ranks];
        Arrays.fill(rankRun, -1);
        this.slotMsg = new int[ranks * slots];
        this.slotPsn0 = new int[ranks * slots];
        this.slotCrc = new int[ranks * slots];
        Arrays.fill(slotMsg, -1);
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

    public int downSlotMsg(final int slot)
    {
        return downSlotMsg[slot];
    }

    public int downSlotPsn0(final int slot)
    {
        return downSlotPsn0[slot];
    }

    /**
     * A leaf saw the spine's result for message {@code msgId} begin at {@code psn0} on its entering connection.
     */
    public void recordDownStart(final int msgId, final int psn0)
    {
        final int index = msgId & (slots - 1);
        downSlotMsg[index] = msgId;
        downSlotPsn0[index] = psn0;
    }

    /**
     * The entering connection is a new one (a new QP, or a new job on it): its message records are forgotten.
     */
    public void forgetDownStarts()
    {
        Arrays.fill(downSlotMsg, -1);
    }

    public long memberMac(final int rank)
    {
        return memberMac[rank];
    }

    /**
     * @return the source MAC first packets of {@code rank} must come from: the configured one, or the one its
     *         connection had when it took part in a completed aggregation; {@link RingMember#ANY_MAC} until then.
     */
    public long boundMac(final int rank)
    {
        return boundMac[rank];
    }

    public boolean isMacBound(final int rank)
    {
        return boundMac[rank] != RingMember.ANY_MAC;
    }

    /**
     * The rank's packet in a completed aggregation came from {@code mac}: after {@link #MAC_BINDING_SUMS} such sums
     * in a row from one MAC, the rank is bound to it (trust on first use: a stranger cannot complete sums on its
     * own, so the members' own traffic names their MACs).
     */
    public void onSumFrom(final int rank, final long mac)
    {
        if (candidateMac[rank] != mac)
        {
            candidateMac[rank] = mac;
            candidateSums[rank] = 1;
        }
        else if (++candidateSums[rank] >= MAC_BINDING_SUMS)
        {
            boundMac[rank] = mac;
        }
    }

    /**
     * A ring packet added a rank's contribution to an aggregator at {@code nowNs} (not a duplicate, and not a
     * retransmission answered from a stored result).
     */
    public void progress(final long nowNs)
    {
        lastProgressNs = nowNs;
    }

    /**
     * A sum of the current run completed: from now on its connections are protected by {@link #mayConnect}.
     */
    public void onSumCompleted()
    {
        runHasSum = true;
    }

    /**
     * @return whether the current run has completed a sum.
     */
    public boolean runHasSum()
    {
        return runHasSum;
    }

    /**
     * Whether a new connection of {@code rank} may connect now. It may always join the current run (the rank has
     * no connection in it), and take the rank over while the run has completed no sum (nothing is protected before
     * then). Otherwise it would begin a new run, which it may only when the current run is over, which the
     * appliance sees as no message in flight (every aggregator free or complete: workers begin a new run only once
     * the previous one is finished), or the current run abandoned (messages in flight but no progress for the
     * abandoned-run time, {@link #DEFAULT_ABANDONED_RUN_NS} by default).
     */
    public boolean mayConnect(final int rank, final long nowNs)
    {
        return rankRun[rank] != run || !runHasSum || region.incomplete() == 0 ||
            nowNs - lastProgressNs > abandonedRunNs;
    }

    /**
     * Whether a superseded connection of {@code rank} (CLT generation {@code connectionGeneration}) may take its
     * rank back: only from a connection that took it over within the current run before the run's first sum
     * (a member whose first packets a stranger's frame displaced). A connection of an earlier run never may.
     */
    public boolean mayTakeBack(final int rank, final int connectionGeneration)
    {
        return rankRun[rank] == run && !runHasSum && connectionGeneration != generation[rank] &&
            connectionGeneration - runFirstGeneration[rank] >= 0;
    }

    public int generation(final int rank)
    {
        return generation[rank];
    }

    /**
     * A new connection now carries {@code rank}: older connections of the rank become stale (the rank's
     * generation advances, see {@link #generation(int)}) and its message start records are forgotten.
     * <p>
     * If the rank has no connection in the current run, this one joins it ({@link #JOINED}: a rank's first
     * connection, or a rank following another that began the run). If it has one and the run has completed no
     * sum, this one takes the rank over within the run ({@link #REPLACED}): the other ranks keep their
     * connections. Otherwise this connection begins a new run ({@link #NEW_RUN}): the other ranks' connections
     * belong to the old run until they connect again, and the caller must discard the ring's aggregators. This
     * relies on the workers' discipline that a new run starts only once every connection of the previous one is
     * finished (every result delivered and acknowledged): after that, no packet of the old run can need an
     * aggregator.
     *
     * A rank that joins a run stalled for the abandoned-run time joins it with its partial sums discarded
     * ({@link #JOINED_ABANDONED}).
     *
     * @return {@link #JOINED}, {@link #JOINED_ABANDONED}, {@link #REPLACED} or {@link #NEW_RUN}.
     */
    public int connect(final int rank, final long nowNs)
    {
        generation[rank]++;
        Arrays.fill(slotMsg, rank * slots, (rank + 1) * slots, -1);
        if (rankRun[rank] != run)
        {
            rankRun[rank] = run;
            runFirstGeneration[rank] = generation[rank];
            // A rank joins only a run with no sum (a sum needs every rank in the run). If the run has stalled, its
            // partial sums may be a killed job's, and this connection's first packet would complete them.
            return region.incomplete() != 0 && nowNs - lastProgressNs > abandonedRunNs ? JOINED_ABANDONED : JOINED;
        }
        if (!runHasSum)
        {
            return REPLACED;
        }
        run++;
        runHasSum = false;
        rankRun[rank] = run;
        runFirstGeneration[rank] = generation[rank];
        return NEW_RUN;
    }

    /**
     * @return whether the rank's current connection belongs to the current run (false once another rank began a
     * new run, until this rank connects again).
     */
    public boolean inCurrentRun(final int rank)
    {
        return rankRun[rank] == run;
    }

    /**
     * @return the number of the current run (0 for the first).
     */
    public int run()
    {
        return run;
    }

    public int slotMsg(final int rank, final int slot)
    {
        return slotMsg[rank * slots + slot];
    }

    public int slotPsn0(final int rank, final int slot)
    {
        return slotPsn0[rank * slots + slot];
    }

    /**
     * @return the CRC-32 of the gradient bytes of the first packet recorded for the slot.
     */
    public int slotCrc(final int rank, final int slot)
    {
        return slotCrc[rank * slots + slot];
    }

    /**
     * Record that the rank's connection started message {@code msgId} at {@code psn0}, its first packet carrying
     * gradient bytes whose CRC-32 is {@code gradientCrc} (a go-back-N retransmission carries the same bytes).
     */
    public void recordMessageStart(final int rank, final int msgId, final int psn0, final int gradientCrc)
    {
        final int index = rank * slots + (msgId & (slots - 1));
        slotMsg[index] = msgId;
        slotPsn0[index] = psn0;
        slotCrc[index] = gradientCrc;
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
