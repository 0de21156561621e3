package io.netreduce.dataplane.netreduce;

import io.netreduce.dataplane.clt.AddressPairSet;
import io.netreduce.dataplane.clt.ConnectionTable;
import io.netreduce.dataplane.clt.FlowKey;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.frame.ArrivingFrame;
import io.netreduce.dataplane.frame.FrameOutput;
import io.netreduce.dataplane.ring.Ring;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import org.HdrHistogram.SingleWriterRecorder;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * NetReduce (the paper's protocol beneath RoCEv2): every RoCEv2 frame the dispatch hands over, a well-formed RC
 * RDMA WRITE ({@link #onWrite}) or any other RoCEv2 ({@link #onOtherRoce}). It decides, from the ring table and
 * the CLT, which of them are ring traffic and which pass through:
 * <ol>
 *   <li>RC RDMA WRITE whose payload starts with the InetTag (a first packet): to the {@link Sequencer}, which
 *       checks it against its ring, records it in the CLT and hands it to the {@link Aggregator};</li>
 *   <li>a spine's result arriving at a leaf: to the {@link DownSequencer};</li>
 *   <li>other RC RDMA WRITE packets of a ring (or down) connection found in the CLT: placed by PSN, then
 *       aggregated;</li>
 *   <li>RoCEv2 of no ring: forwarded unchanged;</li>
 *   <li>anything invalid on a ring connection: dropped, counted under its reason.</li>
 * </ol>
 * Its tables (ring table, CLT, ring edges, aggregator regions) are the lane's, installed by its commands; what it
 * shares with other protocols is the output, the counters and the captures, all through {@link FrameOutput}.
 * <p>
 * Single-threaded and allocation-free per packet. Not thread-safe.
 */
public final class NetReduceProtocol
{
    private final Ring[] rings;
    private final ConnectionTable clt;
    private final AddressPairSet edges;
    private final FrameOutput output;
    private final Sequencer sequencer;
    private final DownSequencer downSequencer;
    private final AtomicCounter cltMisses;
    private final AtomicCounter foreignTagOnRingEdge;
    private final AtomicCounter foreignTagEventsLost;
    private final ForeignTagEvents foreignTags;

    /**
     * @param rings       the ring table, indexed by RingID (the lane's, read in place).
     * @param clt         the connection lookup table.
     * @param edges       the address pairs of every installed ring's connections.
     * @param latency     recorder of first-packet-in to results-out times, in nanoseconds.
     * @param foreignTags where connections on a ring edge without the ring's InetTag are reported.
     */
    public NetReduceProtocol(
        final Ring[] rings,
        final ConnectionTable clt,
        final AddressPairSet edges,
        final DataplaneCounters counters,
        final FrameOutput output,
        final SingleWriterRecorder latency,
        final long highestLatency,
        final ForeignTagEvents foreignTags)
    {
        this.rings = rings;
        this.clt = clt;
        this.edges = edges;
        this.output = output;
        final Aggregator aggregator = new Aggregator(output, counters, latency, highestLatency);
        final PacketCheck check = new PacketCheck(clt, output);
        this.sequencer = new Sequencer(rings, clt, edges, counters, output, aggregator, check);
        this.downSequencer = new DownSequencer(rings, clt, counters, output, aggregator, check, sequencer);
        this.cltMisses = counters.counter(DataplaneCounter.CLT_MISSES);
        this.foreignTagOnRingEdge = counters.counter(DataplaneCounter.FOREIGN_TAG_ON_RING_EDGE);
        this.foreignTagEventsLost = counters.counter(DataplaneCounter.FOREIGN_TAG_EVENTS_LOST);
        this.foreignTags = foreignTags;
    }

    /**
     * Whether a first packet's payload starts with an INA header: the InetTag of the ring its RingID names, or,
     * when no such ring is installed, the default tag (counted then as traffic for an unknown ring).
     */
    private boolean isTagged(final MutableDirectBuffer buffer, final RoceFrame frame)
    {
        if (frame.payloadLength() < InaHeader.LENGTH)
        {
            return false;
        }
        final int ina = frame.payloadOffset();
        final Ring ring = rings[InaHeader.ringId(buffer, ina)];
        return InaHeader.inetTag(buffer, ina) == (ring != null ? ring.inetTag() : InaHeader.INET_TAG);
    }

    /**
     * Whether a first packet is a spine's result arriving at a leaf: its payload starts with the result tag of a
     * leaf ring (the spine marks what it sends down; a leaf's own results never come back to it).
     */
    private boolean isSpineResult(final MutableDirectBuffer buffer, final RoceFrame frame)
    {
        if (frame.payloadLength() < InaHeader.LENGTH)
        {
            return false;
        }
        final int ina = frame.payloadOffset();
        final Ring ring = rings[InaHeader.ringId(buffer, ina)];
        return ring != null && ring.isLeaf() && InaHeader.inetTag(buffer, ina) == ring.resultTag();
    }

    private static boolean isResponse(final int opcode)
    {
        return opcode == Opcode.ACKNOWLEDGE || opcode == Opcode.ATOMIC_ACKNOWLEDGE || opcode == Opcode.CNP ||
            (opcode >= Opcode.RDMA_READ_RESPONSE_FIRST && opcode <= Opcode.RDMA_READ_RESPONSE_ONLY);
    }

    private void reportForeignTag(final RoceFrame frame, final FlowKey key, final MutableDirectBuffer buffer)
    {
        foreignTagOnRingEdge.incrementRelease();
        final boolean longEnough = frame.payloadLength() >= InaHeader.LENGTH;
        if (!foreignTags.offer(key, longEnough ? InaHeader.inetTag(buffer, frame.payloadOffset()) : 0,
            longEnough ? InaHeader.ringId(buffer, frame.payloadOffset()) : -1))
        {
            foreignTagEventsLost.incrementRelease();
        }
    }

    /**
     * RoCEv2 that is not a well-formed RC RDMA WRITE ({@code status} is {@link RoceFrame}'s parse status): responses
     * pass; anything else on a ring connection (or a broken frame on a ring edge) is dropped, since it would shift
     * the PSN sequence the aggregation relies on or reach a receiver that would take its payload for a result.
     */
    /**
     * @return what says whether a ring entry of the CLT has been replaced by its rank, for the agent's sweep.
     */
    public ConnectionTable.StaleTest staleTest()
    {
        return sequencer;
    }

    public void onOtherRoce(final ArrivingFrame arriving, final int status)
    {
        final RoceFrame frame = arriving.frame();
        if (status == RoceFrame.TRUNCATED || status == RoceFrame.MALFORMED)
        {
            // The BTH may not be readable: judge by the addresses alone.
            if (edges.contains(arriving.key(0)))
            {
                output.drop(arriving, DataplaneCounter.DROP_MALFORMED);
                return;
            }
            output.forward(arriving);
            return;
        }
        final int slot = clt.find(arriving.key(frame.destQp()));
        if (slot >= 0 && (clt.kind(slot) == ConnectionTable.KIND_RING || clt.kind(slot) == ConnectionTable.KIND_DOWN) &&
            (status == RoceFrame.UNKNOWN_OPCODE || !isResponse(frame.opcode())))
        {
            // A ring QP carries RDMA WRITEs one way and responses (ACK, NAK, CNP) the other.
            output.drop(arriving, DataplaneCounter.DROP_UNEXPECTED_OPCODE);
            return;
        }
        output.forward(arriving);
    }

    /**
     * A well-formed RC RDMA WRITE packet (FIRST, MIDDLE, LAST or ONLY, with or without immediate).
     */
    public void onWrite(final ArrivingFrame arriving)
    {
        final RoceFrame frame = arriving.frame();
        final FlowKey key = arriving.key(frame.destQp());
        final boolean firstOpcode = Opcode.has(frame.opcode(), Opcode.IS_FIRST);
        if (firstOpcode && isTagged(arriving.buffer(), frame))
        {
            sequencer.onTaggedFirst(arriving);
            return;
        }
        if (firstOpcode && isSpineResult(arriving.buffer(), frame))
        {
            downSequencer.onDownFirst(arriving);
            return;
        }
        final int slot = clt.find(key);
        if (slot < 0)
        {
            cltMisses.incrementRelease();
            if (!edges.contains(key))
            {
                output.forward(arriving);
            }
            else if (firstOpcode)
            {
                // On a ring edge, a first packet without the ring's tag: a client with another tag or header.
                // Learnt as foreign (so seen once per connection) and reported for the control side to log; beyond
                // the foreign connections' share of the CLT, dropped and counted instead.
                if (sequencer.learnForeign(arriving, key))
                {
                    reportForeignTag(frame, key, arriving.buffer());
                    output.forward(arriving);
                }
            }
            else
            {
                output.drop(arriving, DataplaneCounter.DROP_UNKNOWN_CONNECTION);
            }
            return;
        }
        // Every kind's last packet time: foreign entries expire after an idle time, and so do ring entries once
        // their rank has replaced them (ConnectionTable.expireStale).
        clt.touch(slot, arriving.batchNs());
        if (clt.kind(slot) == ConnectionTable.KIND_FOREIGN)
        {
            output.forward(arriving);
            return;
        }
        if (firstOpcode)
        {
            output.drop(arriving, DataplaneCounter.DROP_MISSING_INA_HEADER);
            return;
        }
        if (clt.kind(slot) == ConnectionTable.KIND_DOWN)
        {
            downSequencer.onDownPacket(arriving, slot);
            return;
        }
        sequencer.onRingPacket(arriving, slot);
    }
}
