package io.netreduce.dataplane.netreduce;

import io.netreduce.dataplane.frame.ArrivingFrame;
import io.netreduce.dataplane.frame.FrameOutput;

import io.netreduce.dataplane.aggregator.AggregatorRegion;
import io.netreduce.dataplane.clt.AddressPairSet;
import io.netreduce.dataplane.clt.ConnectionTable;
import io.netreduce.dataplane.clt.FlowKey;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.dataplane.ring.Ring;
import io.netreduce.dataplane.ring.RingRuns;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.protocol.icrc.Crc32Combine;
import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * The sequencing stage: places a ring connection's RDMA WRITE packet in its ring, message and position, or drops
 * it under a counted reason.
 * <ul>
 *   <li>A first packet carrying the InetTag is checked against the ring it names (size, ICRC, MsgLen, rank,
 *       membership of source and destination) and recorded in the CLT: a new connection is inserted, a
 *       connection's next message updates its entry, a first packet off the connection's PSN sequence is a new
 *       connection on a reused QP number (and may start a new run of the ring), and so is a message 0 on the
 *       sequence with other gradient bytes than the connection's message 0 had (a go-back-N retransmission
 *       resends the same bytes: this is a new job on the same QP number and start PSN).</li>
 *   <li>Any other packet of a ring connection is placed by PSN: its message is the CLT's newest message plus
 *       floor((PSN - PSN0) / MsgLen), which must match the per-rank record of that message's PSN0, at
 *       position PSN - PSN0 within it.</li>
 * </ul>
 * Placed packets go to the {@link Aggregator}. A leaf's entering cross-rack connection is the
 * {@link DownSequencer}'s; the checks both share are {@link PacketCheck}'s. Single-threaded and allocation-free per
 * packet.
 */
final class Sequencer implements ConnectionTable.StaleTest
{
    /** {@link #recordFirst}'s answer for a packet it dropped. */
    private static final int REFUSED = Integer.MIN_VALUE;

    private final Ring[] rings;
    private final ConnectionTable clt;
    private final AddressPairSet edges;
    private final DataplaneCounters counters;
    private final FrameOutput output;
    private final Aggregator aggregator;
    private final PacketCheck check;
    private final AtomicCounter ringRestarts;
    private final AtomicCounter connectionsReplaced;
    private final AtomicCounter abandonedPartialsDiscarded;
    private final AtomicCounter cltInserts;
    private final AtomicCounter cltUpdates;
    private final AtomicCounter cltForeign;
    private final AtomicCounter cltFull;
    private final AtomicCounter cltEvicted;

    Sequencer(
        final Ring[] rings,
        final ConnectionTable clt,
        final AddressPairSet edges,
        final DataplaneCounters counters,
        final FrameOutput output,
        final Aggregator aggregator,
        final PacketCheck check)
    {
        this.rings = rings;
        this.clt = clt;
        this.edges = edges;
        this.check = check;
        this.counters = counters;
        this.output = output;
        this.aggregator = aggregator;
        ringRestarts = counters.counter(DataplaneCounter.RING_RESTARTS);
        connectionsReplaced = counters.counter(DataplaneCounter.RING_CONNECTIONS_REPLACED);
        abandonedPartialsDiscarded = counters.counter(DataplaneCounter.RING_ABANDONED_PARTIALS_DISCARDED);
        cltInserts = counters.counter(DataplaneCounter.CLT_INSERTS);
        cltUpdates = counters.counter(DataplaneCounter.CLT_UPDATES);
        cltForeign = counters.counter(DataplaneCounter.CLT_FOREIGN);
        cltFull = counters.counter(DataplaneCounter.CLT_FULL);
        cltEvicted = counters.counter(DataplaneCounter.CLT_EVICTED);
    }

    /**
     * Learn a connection on a ring edge that is not a ring connection (no InetTag, or an unknown ring), so its
     * later packets pass through without a second look. Any host on the switch can send such first packets, so
     * foreign connections hold only their share of the CLT, in total and per source address: beyond it the first
     * packet is dropped, counted by reason (its connection's later packets would be unknown ones on a ring edge,
     * and dropped too; the sender's RC retransmission tries again).
     *
     * @return whether the connection was learnt; if not, the frame has been dropped.
     */
    boolean learnForeign(final ArrivingFrame arriving, final FlowKey key)
    {
        final int slot = clt.insert(key, ConnectionTable.KIND_FOREIGN);
        if (slot >= 0)
        {
            clt.touch(slot, arriving.batchNs());
            cltForeign.incrementRelease();
            return true;
        }
        if (slot == ConnectionTable.FOREIGN_LIMIT)
        {
            output.drop(arriving, DataplaneCounter.DROP_CLT_FOREIGN_LIMIT);
        }
        else if (slot == ConnectionTable.SOURCE_LIMIT)
        {
            output.drop(arriving, DataplaneCounter.DROP_CLT_FOREIGN_SOURCE_LIMIT);
        }
        else
        {
            cltFull.incrementRelease();
            output.drop(arriving, DataplaneCounter.DROP_CLT_FULL);
        }
        return false;
    }

    /**
     * Insert a ring (or down) connection; when the table is full, evict a foreign entry or a rank's replaced
     * connection first: what non-members may hold never keeps a member's connection out.
     *
     * @return the slot, or a negative value when the table is full of current ring connections.
     */
    int insertMember(final FlowKey key, final int kind, final long nowNs)
    {
        int slot = clt.insert(key, kind);
        if (slot == ConnectionTable.FULL && clt.evict(this))
        {
            cltEvicted.incrementRelease();
            slot = clt.insert(key, kind);
        }
        if (slot >= 0)
        {
            clt.touch(slot, nowNs);
        }
        return slot;
    }

    /**
     * A ring entry is stale when its rank has a newer connection (or its ring is gone).
     */
    @Override
    public boolean isStale(final int ringId, final int rank, final int generation)
    {
        final Ring ring = rings[ringId & 0xFF];
        return ring == null || ring.runs().generation(rank) != generation;
    }

    /**
     * A first packet (RDMA WRITE FIRST or ONLY) whose payload starts with the InetTag; the frame's key is filled.
     */
    void onTaggedFirst(final ArrivingFrame arriving)
    {
        final RoceFrame frame = arriving.frame();
        final MutableDirectBuffer buffer = arriving.buffer();
        final FlowKey key = arriving.key();
        final int ina = frame.payloadOffset();
        final Ring ring = rings[InaHeader.ringId(buffer, ina)];
        if (ring == null)
        {
            counters.increment(DataplaneCounter.PASS_THROUGH_UNKNOWN_RING);
            if (edges.contains(key))
            {
                final int slot = clt.find(key);
                if (slot < 0)
                {
                    if (!learnForeign(arriving, key))
                    {
                        return;
                    }
                }
                else
                {
                    clt.setForeign(slot);
                    clt.touch(slot, arriving.batchNs());
                }
            }
            output.forward(arriving);
            return;
        }
        if (!check.checkLinkLayer(arriving))
        {
            return;
        }
        final int gradient = ina + InaHeader.LENGTH;
        if (frame.payloadLength() != ring.payloadSize() || frame.padCount() != 0)
        {
            output.drop(arriving, DataplaneCounter.DROP_WRONG_SIZE);
            return;
        }
        // The header CRC is computed once, before the tag is rewritten; the stored (marked) header's CRC follows
        // from it by the ring's result-tag CRC delta.
        if (!check.checkIcrc(arriving, frame, gradient, ring.shiftOperator(0)))
        {
            return;
        }
        final int headerCrc = check.checkedHeaderCrc();
        final DataplaneCounter refusal = checkFirst(arriving, ring);
        if (refusal != null)
        {
            output.drop(arriving, refusal);
            return;
        }
        // From here on the rank is the ring's local index (the INA header's rank is global: a leaf sums its rack's
        // ranks, a spine the racks' leaving connections).
        final int rank = ring.localRank(InaHeader.rank(buffer, ina));
        final int msgId = InaHeader.msgId(buffer, ina);
        final int age = recordFirst(arriving, ring, rank, msgId);
        if (age == REFUSED)
        {
            return;
        }
        if (age <= -ring.slots())
        {
            output.drop(arriving, DataplaneCounter.DROP_STALE_PACKET);
            return;
        }
        ring.starts().recordMessageStart(rank, msgId, frame.psn(), check.gradientCrc());
        if (ring.sendsUp(rank))
        {
            // A leaf's leaving cross-rack connection carries the rack's partial sum to the spine, marked with the
            // partial tag: the only request tag the spine sums, so that the rank's own message, should it reach
            // the spine past this leaf, is not taken for the rack's sum.
            InaHeader.inetTag(buffer, ina, Hierarchy.PARTIAL_TAG);
            aggregator.aggregate(arriving, ring, rank, msgId, 0, age, gradient, headerCrc ^ ring.partialTagCrcDelta());
            return;
        }
        // Results carry the ring's result tag so the receiving worker can tell a sum from a message that passed
        // through unaggregated. The rank's stored header (and so its header CRC) is the marked one.
        InaHeader.inetTag(buffer, ina, ring.resultTag());
        aggregator.aggregate(arriving, ring, rank, msgId, 0, age, gradient, headerCrc ^ ring.resultTagCrcDelta());
    }

    /**
     * The checks of a first packet with a good ICRC against its ring that need no table: MsgLen, rank, opcode,
     * and that source and destination are the rank and its successor (addresses, receive QP, MAC where
     * configured).
     *
     * @return the reason to drop it, or null.
     */
    private static DataplaneCounter checkFirst(final ArrivingFrame arriving, final Ring ring)
    {
        final RoceFrame frame = arriving.frame();
        final MutableDirectBuffer buffer = arriving.buffer();
        final int ina = frame.payloadOffset();
        if (InaHeader.msgLen(buffer, ina) != ring.msgLen())
        {
            return DataplaneCounter.DROP_WRONG_MSG_LEN;
        }
        final int rank = ring.localRank(InaHeader.rank(buffer, ina));
        if (rank < 0)
        {
            return DataplaneCounter.DROP_BAD_RANK;
        }
        if (Opcode.has(frame.opcode(), Opcode.IS_LAST) != (ring.msgLen() == 1))
        {
            return DataplaneCounter.DROP_OPCODE_MISMATCH;
        }
        final FlowKey key = arriving.key();
        if (!ring.isSource(rank, key.srcHigh(), key.srcLow()) ||
            !ring.isDestination(rank, key.dstHigh(), key.dstLow()) ||
            (ring.destinationReceiveQp(rank) != RingMember.ANY && ring.destinationReceiveQp(rank) != key.qp()))
        {
            return DataplaneCounter.DROP_SPOOFED;
        }
        if (ring.macs().isMacBound(rank) && ring.macs().boundMac(rank) != EthernetHeader.srcMac(buffer, arriving.offset()))
        {
            // A host on the switch that is not the member, sending with its own MAC and the member's address.
            return DataplaneCounter.DROP_MAC_MISMATCH;
        }
        return null;
    }

    /**
     * Record a checked first packet in the CLT: insert a new connection, update the entry with the
     * connection's next message, or take a first packet off the connection's PSN sequence, or a message 0 on it
     * that is not a retransmission, for a new connection on a reused QP number.
     *
     * @return the message's age (0 for the connection's newest message, negative for a retransmitted older one),
     *         or {@link #REFUSED} when the packet was dropped.
     */
    private int recordFirst(final ArrivingFrame arriving, final Ring ring, final int rank, final int msgId)
    {
        final FlowKey key = arriving.key();
        final int psn = arriving.frame().psn();
        int slot = clt.find(key);
        if (slot < 0)
        {
            if (!ring.runs().mayConnect(rank, arriving.batchNs()))
            {
                output.drop(arriving, DataplaneCounter.DROP_RUN_IN_PROGRESS);
                return REFUSED;
            }
            slot = insertMember(key, ConnectionTable.KIND_RING, arriving.batchNs());
            if (slot < 0)
            {
                cltFull.incrementRelease();
                output.drop(arriving, DataplaneCounter.DROP_CLT_FULL);
                return REFUSED;
            }
            cltInserts.incrementRelease();
            return connect(arriving, ring, slot, rank, msgId, psn);
        }
        if (clt.kind(slot) != ConnectionTable.KIND_RING || clt.ring(slot) != ring.id() ||
            clt.rank(slot) != rank || !check.continuesPsnSequence(slot, msgId, psn, ring.msgLen()) ||
            isReusedQueuePair(slot, ring, msgId, arriving.batchNs()))
        {
            // Not this connection's PSN sequence: a new QP that got the same number as an old one (rxe hands
            // QP numbers out again) and a fresh random start PSN; or the same QP number and start PSN again.
            return reconnect(arriving, ring, slot, rank, msgId, psn);
        }
        if (clt.generation(slot) != ring.runs().generation(rank))
        {
            if (ring.runs().mayTakeBack(rank, clt.generation(slot)))
            {
                // A connection displaced before the run's first sum (by a stranger's frame, say): it takes its
                // rank back, as any connection may until then.
                cltUpdates.incrementRelease();
                return connect(arriving, ring, slot, rank, msgId, psn);
            }
            // A retransmission on a connection that a newer one of the rank superseded: its aggregators are gone.
            output.drop(arriving, DataplaneCounter.DROP_STALE_CONNECTION);
            return REFUSED;
        }
        final int delta = (byte)(msgId - clt.msgId(slot));
        if (delta <= 0 && !isRetransmission(ring, rank, msgId, psn))
        {
            // On the sequence but with other bytes than the connection sent for that message: not go-back-N.
            if (msgId == 0)
            {
                // A new job on the same QP number and start PSN, after a job shorter than 2N messages.
                return reconnect(arriving, ring, slot, rank, msgId, psn);
            }
            output.drop(arriving, DataplaneCounter.DROP_NOT_A_RETRANSMISSION);
            return REFUSED;
        }
        if (!ring.runs().inCurrentRun(rank))
        {
            // A retransmission on a connection that a newer run of the ring superseded: taking it for a new
            // connection would end the new run.
            output.drop(arriving, DataplaneCounter.DROP_STALE_CONNECTION);
            return REFUSED;
        }
        if (delta > 0)
        {
            cltUpdates.incrementRelease();
            clt.setLatest(slot, msgId, psn);
            return 0;
        }
        // Same or older MsgID on this connection's PSN sequence (checked above) with the same bytes: a go-back-N
        // retransmission of a first packet. The CLT keeps its newest message.
        return delta;
    }

    /**
     * Whether a first packet (MsgID, PSN) on its connection's sequence, for the connection's newest message or an
     * older one, may be a go-back-N retransmission: RC resends the very bytes it sent (a worker refills a send
     * slot only after its send completed), so the gradient's CRC must be the one recorded when the connection
     * started that message. When no start of that message is recorded (the connection began after it, or the
     * slot was reused 2N messages later) there is nothing to compare: the other rules decide.
     */
    private boolean isRetransmission(final Ring ring, final int rank, final int msgId, final int psn)
    {
        final int arraySlot = msgId & (ring.slots() - 1);
        return ring.starts().slotMsg(rank, arraySlot) != msgId || ring.starts().slotPsn0(rank, arraySlot) != psn ||
            ring.starts().slotCrc(rank, arraySlot) == check.gradientCrc();
    }

    /**
     * A first packet that is not its CLT entry's connection: a new connection in the entry's slot, if the ring
     * lets the rank connect now.
     */
    private int reconnect(
        final ArrivingFrame arriving, final Ring ring, final int slot, final int rank, final int msgId, final int psn)
    {
        if (!ring.runs().mayConnect(rank, arriving.batchNs()))
        {
            output.drop(arriving, DataplaneCounter.DROP_RUN_IN_PROGRESS);
            return REFUSED;
        }
        cltUpdates.incrementRelease();
        return connect(arriving, ring, slot, rank, msgId, psn);
    }

    /**
     * Whether a first packet that lies on its connection's PSN sequence is in fact the first message of a new
     * connection that reuses the QP number and the start PSN: a message 0 at least 2N messages older than the
     * connection's newest one, while the ring's run is over. Not a window (N): a rank may have the result of
     * message m while its own write of m is unacknowledged, and go-back-N then resends from m after m + N began;
     * but it posts m + 2N only after m's send completed, so nothing 2N or more behind is ever resent. Checked only
     * for a first packet on the sequence, so it costs nothing per packet.
     */
    private boolean isReusedQueuePair(final int slot, final Ring ring, final int msgId, final long nowNs)
    {
        return msgId == 0 && (byte)(msgId - clt.msgId(slot)) <= -ring.slots() && ring.runs().mayConnect(clt.rank(slot),
            nowNs) && ring.runs().generation(clt.rank(slot)) == clt.generation(slot);
    }

    /**
     * A new connection carries {@code rank} from CLT slot {@code slot}, its newest message the one in hand. If it
     * begins a new run of the ring, the previous run's aggregators (its last N results, kept for retransmissions,
     * and anything it left incomplete) are discarded. If it takes the rank over within a run that has completed no
     * sum, the run's partial sums are discarded (they may hold the displaced connection's gradients, a stranger's
     * say, and no result is lost: nothing was complete), the other ranks keep their connections and resend, and
     * the packet in hand is dropped: the rank's own retransmission is summed, so a stranger's frame that takes a
     * member's rank over never is.
     *
     * @return 0 (the packet is the connection's newest message), or {@link #REFUSED} when the packet was dropped.
     */
    private int connect(
        final ArrivingFrame arriving, final Ring ring, final int slot, final int rank, final int msgId, final int psn)
    {
        final int outcome = ring.connect(rank, arriving.batchNs());
        clt.setRing(slot, ring.id(), rank, msgId, psn, ring.runs().generation(rank));
        if (outcome == RingRuns.JOINED)
        {
            return 0;
        }
        ring.region().freeAll();
        if (outcome == RingRuns.JOINED_ABANDONED)
        {
            abandonedPartialsDiscarded.incrementRelease();
            return 0;
        }
        if (outcome == RingRuns.NEW_RUN)
        {
            ringRestarts.incrementRelease();
            return 0;
        }
        connectionsReplaced.incrementRelease();
        output.drop(arriving, DataplaneCounter.DROP_RANK_TAKEN_OVER);
        return REFUSED;
    }

    /**
     * A middle or last packet of a ring connection (CLT slot {@code slot}).
     */
    void onRingPacket(final ArrivingFrame arriving, final int slot)
    {
        final RoceFrame frame = arriving.frame();
        final Ring ring = rings[clt.ring(slot)];
        final int rank = clt.rank(slot);
        if (!check.checkLinkLayer(arriving))
        {
            return;
        }
        if (clt.generation(slot) != ring.runs().generation(rank) || !ring.runs().inCurrentRun(rank))
        {
            output.drop(arriving, DataplaneCounter.DROP_STALE_CONNECTION);
            return;
        }
        // Not only first packets: a host that sends with a member's address and its own MAC must not put a middle
        // packet into a member's message either.
        if (!check.checkSourceMac(arriving, ring, rank))
        {
            return;
        }
        if (!check.placeByPsn(arriving, frame, ring, slot))
        {
            return;
        }
        final int psn = frame.psn();
        final int age = check.placedAge();
        final int position = check.placedPosition();
        final int msgId = check.placedMsgId();
        final int arraySlot = msgId & (ring.slots() - 1);
        if (ring.starts().slotMsg(rank, arraySlot) != msgId ||
            ring.starts().slotPsn0(rank, arraySlot) != BthHeader.psnAdd(psn, -position))
        {
            output.drop(arriving, DataplaneCounter.DROP_STALE_PACKET);
            return;
        }
        final int gradient = frame.payloadOffset();
        if (!check.checkIcrc(arriving, frame, gradient, ring.shiftOperator(position)))
        {
            return;
        }
        final int headerCrc = check.checkedHeaderCrc();
        aggregator.aggregate(arriving, ring, rank, msgId, position, age, gradient, headerCrc);
    }
}
