package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.aggregator.AggregatorRegion;
import io.netreduce.dataplane.clt.AddressPairSet;
import io.netreduce.dataplane.clt.ConnectionTable;
import io.netreduce.dataplane.clt.FlowKey;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.dataplane.ring.Ring;
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
 * Placed packets go to the {@link Aggregator}. Single-threaded and allocation-free per packet.
 */
final class Sequencer
{
    /** {@link #recordFirst}'s answer for a packet it dropped. */
    private static final int REFUSED = Integer.MIN_VALUE;

    private final Ring[] rings;
    private final ConnectionTable clt;
    private final AddressPairSet edges;
    private final DataplaneCounters counters;
    private final FrameOutput output;
    private final Aggregator aggregator;
    private final Icrc frameIcrc = new Icrc();
    /** CRC-32 of the gradient bytes of the frame {@link #checkIcrc} last accepted. */
    private int gradientCrc;
    /** CRC of the headers (up to the gradient) of the frame {@link #checkIcrc} last accepted. */
    private int checkedHeaderCrc;
    private int placedAge;
    private int placedPosition;
    private int placedMsgId;
    private final AtomicCounter ringRestarts;
    private final AtomicCounter connectionsReplaced;
    private final AtomicCounter abandonedPartialsDiscarded;
    private final AtomicCounter cltInserts;
    private final AtomicCounter cltUpdates;
    private final AtomicCounter cltForeign;
    private final AtomicCounter cltFull;
    private final AtomicCounter downConnections;

    Sequencer(
        final DataplaneTables tables,
        final DataplaneCounters counters,
        final FrameOutput output,
        final Aggregator aggregator)
    {
        this.rings = tables.rings;
        this.clt = tables.clt;
        this.edges = tables.edges;
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
        downConnections = counters.counter(DataplaneCounter.DOWN_CONNECTIONS);
    }

    /**
     * Learn a connection on a ring edge that is not a ring connection (no InetTag, or an unknown ring), so its
     * later packets pass through without a second look.
     */
    void learnForeign(final FlowKey key, final long nowNs)
    {
        final int slot = clt.insert(key, ConnectionTable.KIND_FOREIGN);
        if (slot < 0)
        {
            cltFull.incrementRelease();
        }
        else
        {
            clt.touch(slot, nowNs);
            cltForeign.incrementRelease();
        }
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
                    learnForeign(key, arriving.batchNs());
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
        final int gradient = ina + InaHeader.LENGTH;
        if (frame.payloadLength() != ring.payloadSize() || frame.padCount() != 0)
        {
            output.drop(arriving, DataplaneCounter.DROP_WRONG_SIZE);
            return;
        }
        // The header CRC is computed once, before the tag is rewritten; the stored (marked) header's CRC follows
        // from it by the ring's result-tag CRC delta.
        if (!checkIcrc(arriving, frame, gradient, ring.shiftOperator(0)))
        {
            return;
        }
        final int headerCrc = checkedHeaderCrc;
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
        ring.recordMessageStart(rank, msgId, frame.psn(), gradientCrc);
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
     * A leaf's first packet of a spine result (WRITE FIRST or ONLY with the ring's result tag) on what should be
     * its entering cross-rack connection: checked like a ring's first packet (size, ICRC, MsgLen, the sender's
     * rank, opcode, addresses and receive QP), recorded in the CLT as the connection's newest message (a first
     * packet off the connection's PSN sequence is a new connection: the leaf's CTT entry for it is populated
     * again), then handed to the {@link Aggregator} to be translated onto the rack's connections.
     */
    void onDownFirst(final ArrivingFrame arriving)
    {
        final RoceFrame frame = arriving.frame();
        final MutableDirectBuffer buffer = arriving.buffer();
        final FlowKey key = arriving.key();
        final int ina = frame.payloadOffset();
        final Ring ring = rings[InaHeader.ringId(buffer, ina)];
        final int gradient = ina + InaHeader.LENGTH;
        if (frame.payloadLength() != ring.payloadSize() || frame.padCount() != 0)
        {
            output.drop(arriving, DataplaneCounter.DROP_WRONG_SIZE);
            return;
        }
        if (!checkIcrc(arriving, frame, gradient, ring.shiftOperator(0)))
        {
            return;
        }
        if (InaHeader.msgLen(buffer, ina) != ring.msgLen())
        {
            output.drop(arriving, DataplaneCounter.DROP_WRONG_MSG_LEN);
            return;
        }
        if (InaHeader.rank(buffer, ina) != ring.incomingRank())
        {
            output.drop(arriving, DataplaneCounter.DROP_BAD_RANK);
            return;
        }
        if (Opcode.has(frame.opcode(), Opcode.IS_LAST) != (ring.msgLen() == 1))
        {
            output.drop(arriving, DataplaneCounter.DROP_OPCODE_MISMATCH);
            return;
        }
        if (!ring.isIncoming(key.srcHigh(), key.srcLow(), key.dstHigh(), key.dstLow(), key.qp()))
        {
            output.drop(arriving, DataplaneCounter.DROP_SPOOFED);
            return;
        }
        final int msgId = InaHeader.msgId(buffer, ina);
        final int psn = frame.psn();
        int slot = clt.find(key);
        if (slot < 0)
        {
            slot = clt.insert(key, ConnectionTable.KIND_DOWN);
            if (slot < 0)
            {
                cltFull.incrementRelease();
                output.drop(arriving, DataplaneCounter.DROP_CLT_FULL);
                return;
            }
            cltInserts.incrementRelease();
            learnDown(ring, slot, msgId, psn);
        }
        else if (clt.kind(slot) != ConnectionTable.KIND_DOWN || clt.ring(slot) != ring.id() ||
            !continuesPsnSequence(slot, msgId, psn, ring.msgLen()))
        {
            // A new QP on the entering connection, or a new job on it: its entry is populated again.
            cltUpdates.incrementRelease();
            learnDown(ring, slot, msgId, psn);
        }
        else
        {
            final int delta = (byte)(msgId - clt.msgId(slot));
            if (delta > 0)
            {
                cltUpdates.incrementRelease();
                clt.setLatest(slot, msgId, psn);
            }
            else if (delta <= -ring.slots())
            {
                output.drop(arriving, DataplaneCounter.DROP_STALE_PACKET);
                return;
            }
        }
        ring.recordDownStart(msgId, psn);
        aggregator.onDown(arriving, ring, msgId, 0, gradient, gradientCrc);
    }

    private void learnDown(final Ring ring, final int slot, final int msgId, final int psn)
    {
        clt.setDown(slot, ring.id(), msgId, psn);
        ring.forgetDownStarts();
        downConnections.incrementRelease();
    }

    /**
     * The placement a middle or last packet of a connection shares, ring or down: its message (MsgID, age against
     * the connection's newest message) and position from its PSN, with the checks that need nothing else (a lost
     * first packet, too old, an opcode that does not fit the position, the wrong size), each a counted drop.
     * Leaves the placement in {@link #placedAge}, {@link #placedPosition} and {@link #placedMsgId} (fields, not an
     * object: the per-packet path allocates nothing).
     *
     * @return false when the packet was dropped.
     */
    private boolean placeByPsn(final ArrivingFrame arriving, final RoceFrame frame, final Ring ring, final int slot)
    {
        final int msgLen = ring.msgLen();
        final int delta = BthHeader.psnDelta(frame.psn(), clt.psn0(slot));
        final int age = Math.floorDiv(delta, msgLen);
        final int position = delta - age * msgLen;
        if (age >= 1)
        {
            output.drop(arriving, DataplaneCounter.DROP_FIRST_PACKET_LOST);
            return false;
        }
        if (age <= -ring.slots())
        {
            output.drop(arriving, DataplaneCounter.DROP_STALE_PACKET);
            return false;
        }
        final boolean last = Opcode.has(frame.opcode(), Opcode.IS_LAST);
        if (position == 0 || last != (position == msgLen - 1))
        {
            output.drop(arriving, DataplaneCounter.DROP_OPCODE_MISMATCH);
            return false;
        }
        if (frame.payloadLength() != ring.payloadSize() || frame.padCount() != 0)
        {
            output.drop(arriving, DataplaneCounter.DROP_WRONG_SIZE);
            return false;
        }
        placedAge = age;
        placedPosition = position;
        placedMsgId = (clt.msgId(slot) + age) & 0xFF;
        return true;
    }

    /**
     * A middle or last packet of a leaf's entering cross-rack connection (CLT slot {@code slot}): placed by PSN
     * against the connection's newest message, as {@link #onRingPacket} places a ring connection's packets.
     */
    void onDownPacket(final ArrivingFrame arriving, final int slot)
    {
        final RoceFrame frame = arriving.frame();
        final Ring ring = rings[clt.ring(slot)];
        if (!placeByPsn(arriving, frame, ring, slot))
        {
            return;
        }
        final int psn = frame.psn();
        final int position = placedPosition;
        final int msgId = placedMsgId;
        final int arraySlot = msgId & (ring.slots() - 1);
        if (ring.downSlotMsg(arraySlot) != msgId || ring.downSlotPsn0(arraySlot) != BthHeader.psnAdd(psn, -position))
        {
            output.drop(arriving, DataplaneCounter.DROP_STALE_PACKET);
            return;
        }
        final int gradient = frame.payloadOffset();
        if (!checkIcrc(arriving, frame, gradient, ring.shiftOperator(position)))
        {
            return;
        }
        aggregator.onDown(arriving, ring, msgId, position, gradient, gradientCrc);
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
        if (ring.isMacBound(rank) && ring.boundMac(rank) != EthernetHeader.srcMac(buffer, arriving.offset()))
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
            if (!ring.mayConnect(rank, arriving.batchNs()))
            {
                output.drop(arriving, DataplaneCounter.DROP_RUN_IN_PROGRESS);
                return REFUSED;
            }
            slot = clt.insert(key, ConnectionTable.KIND_RING);
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
            clt.rank(slot) != rank || !continuesPsnSequence(slot, msgId, psn, ring.msgLen()) ||
            isReusedQueuePair(slot, ring, msgId, arriving.batchNs()))
        {
            // Not this connection's PSN sequence: a new QP that got the same number as an old one (rxe hands
            // QP numbers out again) and a fresh random start PSN; or the same QP number and start PSN again.
            return reconnect(arriving, ring, slot, rank, msgId, psn);
        }
        if (clt.generation(slot) != ring.generation(rank))
        {
            if (ring.mayTakeBack(rank, clt.generation(slot)))
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
        if (!ring.inCurrentRun(rank))
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
        return ring.slotMsg(rank, arraySlot) != msgId || ring.slotPsn0(rank, arraySlot) != psn ||
            ring.slotCrc(rank, arraySlot) == gradientCrc;
    }

    /**
     * A first packet that is not its CLT entry's connection: a new connection in the entry's slot, if the ring
     * lets the rank connect now.
     */
    private int reconnect(
        final ArrivingFrame arriving, final Ring ring, final int slot, final int rank, final int msgId, final int psn)
    {
        if (!ring.mayConnect(rank, arriving.batchNs()))
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
        return msgId == 0 && (byte)(msgId - clt.msgId(slot)) <= -ring.slots() && ring.mayConnect(clt.rank(slot),
            nowNs) && ring.generation(clt.rank(slot)) == clt.generation(slot);
    }

    /**
     * Whether a tagged first packet (MsgID, PSN) lies on the PSN sequence of the connection in CLT slot
     * {@code slot}: every message is exactly MsgLen packets, so message MsgID0 + d starts at PSN0 + d * MsgLen.
     */
    private boolean continuesPsnSequence(final int slot, final int msgId, final int psn, final int msgLen)
    {
        final int delta = (byte)(msgId - clt.msgId(slot));
        return psn == BthHeader.psnAdd(clt.psn0(slot), delta * msgLen);
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
        clt.setRing(slot, ring.id(), rank, msgId, psn, ring.generation(rank));
        if (outcome == Ring.JOINED)
        {
            return 0;
        }
        ring.region().freeAll();
        if (outcome == Ring.JOINED_ABANDONED)
        {
            abandonedPartialsDiscarded.incrementRelease();
            return 0;
        }
        if (outcome == Ring.NEW_RUN)
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
        if (clt.generation(slot) != ring.generation(rank) || !ring.inCurrentRun(rank))
        {
            output.drop(arriving, DataplaneCounter.DROP_STALE_CONNECTION);
            return;
        }
        if (!placeByPsn(arriving, frame, ring, slot))
        {
            return;
        }
        final int psn = frame.psn();
        final int age = placedAge;
        final int position = placedPosition;
        final int msgId = placedMsgId;
        final int arraySlot = msgId & (ring.slots() - 1);
        if (ring.slotMsg(rank, arraySlot) != msgId ||
            ring.slotPsn0(rank, arraySlot) != BthHeader.psnAdd(psn, -position))
        {
            output.drop(arriving, DataplaneCounter.DROP_STALE_PACKET);
            return;
        }
        final int gradient = frame.payloadOffset();
        if (!checkIcrc(arriving, frame, gradient, ring.shiftOperator(position)))
        {
            return;
        }
        final int headerCrc = checkedHeaderCrc;
        aggregator.aggregate(arriving, ring, rank, msgId, position, age, gradient, headerCrc);
    }

    /**
     * The checks every packet to be summed or translated ends with, first or later: its headers fit the
     * aggregator's header slot, and its ICRC matches the CRC of its headers combined with the CRC of its gradient
     * (shifted by {@code shiftOperator}, the packet's position). Leaves the header CRC in {@link #checkedHeaderCrc}
     * and the gradient's in {@link #gradientCrc} (fields: the per-packet path allocates nothing).
     *
     * @return false when the packet was dropped (malformed, bad ICRC).
     */
    private boolean checkIcrc(
        final ArrivingFrame arriving, final RoceFrame frame, final int gradient, final int shiftOperator)
    {
        if (gradient - arriving.offset() > AggregatorRegion.HEADER_SLOT)
        {
            output.drop(arriving, DataplaneCounter.DROP_MALFORMED);
            return false;
        }
        final int headerCrc = frameIcrc.crcUpTo(frame, gradient);
        final int icrcOffset = frame.icrcOffset();
        final MutableDirectBuffer buffer = arriving.buffer();
        final int payloadCrc = frameIcrc.crcOf(buffer, gradient, icrcOffset - gradient);
        if (Crc32Combine.combineWithOperator(headerCrc, payloadCrc, shiftOperator) != Icrc.read(buffer, icrcOffset))
        {
            output.drop(arriving, DataplaneCounter.DROP_BAD_ICRC);
            return false;
        }
        checkedHeaderCrc = headerCrc;
        gradientCrc = payloadCrc;
        return true;
    }
}
