package io.netreduce.dataplane.netreduce;

import io.netreduce.dataplane.aggregator.AggregatorRegion;
import io.netreduce.dataplane.clt.ConnectionTable;
import io.netreduce.dataplane.clt.FlowKey;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.frame.ArrivingFrame;
import io.netreduce.dataplane.frame.FrameOutput;
import io.netreduce.dataplane.ring.Ring;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * The sequencing stage of a leaf's entering cross-rack connection (previous rack's last rank to this rack's
 * first, paper §3.3): the spine's results come down on it. Its first packet of each message is checked and
 * recorded in the CLT as a {@link ConnectionTable#KIND_DOWN} entry (the leaf's CTT, populated from the
 * connection's first packet), its later packets placed by PSN as a ring connection's are, and each is handed to
 * the {@link Aggregator} to be translated onto the rack's connections.
 * <p>
 * Single-threaded and allocation-free per packet.
 */
final class DownSequencer
{
    private final Ring[] rings;
    private final ConnectionTable clt;
    private final FrameOutput output;
    private final Aggregator aggregator;
    private final PacketCheck check;
    private final AtomicCounter cltInserts;
    private final AtomicCounter cltUpdates;
    private final AtomicCounter cltFull;
    private final AtomicCounter downConnections;
    private final Sequencer sequencer;

    DownSequencer(
        final Ring[] rings,
        final ConnectionTable clt,
        final DataplaneCounters counters,
        final FrameOutput output,
        final Aggregator aggregator,
        final PacketCheck check,
        final Sequencer sequencer)
    {
        this.sequencer = sequencer;
        this.rings = rings;
        this.clt = clt;
        this.output = output;
        this.aggregator = aggregator;
        this.check = check;
        cltInserts = counters.counter(DataplaneCounter.CLT_INSERTS);
        cltUpdates = counters.counter(DataplaneCounter.CLT_UPDATES);
        cltFull = counters.counter(DataplaneCounter.CLT_FULL);
        downConnections = counters.counter(DataplaneCounter.DOWN_CONNECTIONS);
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
        if (!check.checkIcrc(arriving, frame, gradient, ring.shiftOperator(0)))
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
        // The spine re-emits the previous rack's last rank's frames: its results come from that member's MAC
        // (configured, or bound by the entering connection's accepted results), not a host's on this rack's switch.
        if (!check.checkSourceMac(arriving, ring, ring.downMacIndex()))
        {
            return;
        }
        final int msgId = InaHeader.msgId(buffer, ina);
        final int psn = frame.psn();
        int slot = clt.find(key);
        if (slot < 0)
        {
            // A result teaches the leaf its entering connection only for a sum it awaits: anything else would
            // decide where the spine's real results are placed without being one.
            if (!awaits(ring, msgId))
            {
                output.drop(arriving, DataplaneCounter.DROP_DOWN_NOT_AWAITED);
                return;
            }
            slot = sequencer.insertMember(key, ConnectionTable.KIND_DOWN, arriving.batchNs());
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
            !check.continuesPsnSequence(slot, msgId, psn, ring.msgLen()))
        {
            // A new QP on the entering connection, or a new job on it: its entry is populated again. Only for a sum
            // the leaf awaits, and, for the ring's own entering connection, only once the leaf's ranks began a new
            // run since it was learned (a new job's results come after its ranks' new connections): a result of
            // the connection's own replayed from further back than the MsgID's 8 bits reach is off the sequence
            // too, and used to populate the entry again, forgetting where the messages in flight began (on the
            // multi-rack bed a replaying stranger stalled the ring so).
            if (!awaits(ring, msgId))
            {
                output.drop(arriving, DataplaneCounter.DROP_DOWN_NOT_AWAITED);
                return;
            }
            if (clt.kind(slot) == ConnectionTable.KIND_DOWN && clt.ring(slot) == ring.id() &&
                ring.downLearnedInRun() == ring.runs().run())
            {
                output.drop(arriving, DataplaneCounter.DROP_DOWN_OFF_SEQUENCE);
                return;
            }
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
        ring.starts().recordDownStart(msgId, psn);
        aggregator.onDown(arriving, ring, msgId, 0, gradient, check.gradientCrc());
    }

    private void learnDown(final Ring ring, final int slot, final int msgId, final int psn)
    {
        clt.setDown(slot, ring.id(), msgId, psn);
        ring.starts().forgetDownStarts();
        ring.downLearned();
        downConnections.incrementRelease();
    }

    /**
     * @return whether the leaf awaits the spine's result of message {@code msgId}: its rack sum of the message's
     *         first position is sent up and not yet answered.
     */
    private static boolean awaits(final Ring ring, final int msgId)
    {
        final AggregatorRegion region = ring.region();
        final int agg = region.offset(ring.aggregatorIndex(msgId, 0));
        return region.boundMsg(agg) == msgId && region.isPartial(agg);
    }

    /**
     * A middle or last packet of a leaf's entering cross-rack connection (CLT slot {@code slot}): placed by PSN
     * against the connection's newest message, as {@link Sequencer#onRingPacket} places a ring connection's packets.
     */
    void onDownPacket(final ArrivingFrame arriving, final int slot)
    {
        final RoceFrame frame = arriving.frame();
        final Ring ring = rings[clt.ring(slot)];
        if (!check.checkLinkLayer(arriving) || !check.checkSourceMac(arriving, ring, ring.downMacIndex()))
        {
            return;
        }
        if (!check.placeByPsn(arriving, frame, ring, slot))
        {
            return;
        }
        final int psn = frame.psn();
        final int position = check.placedPosition();
        final int msgId = check.placedMsgId();
        final int arraySlot = msgId & (ring.slots() - 1);
        if (ring.starts().downSlotMsg(arraySlot) != msgId || ring.starts().downSlotPsn0(arraySlot) != BthHeader.psnAdd(psn, -position))
        {
            output.drop(arriving, DataplaneCounter.DROP_STALE_PACKET);
            return;
        }
        final int gradient = frame.payloadOffset();
        if (!check.checkIcrc(arriving, frame, gradient, ring.shiftOperator(position)))
        {
            return;
        }
        aggregator.onDown(arriving, ring, msgId, position, gradient, check.gradientCrc());
    }
}
