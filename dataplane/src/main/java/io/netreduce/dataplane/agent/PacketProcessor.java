package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.capture.CaptureTap;
import io.netreduce.dataplane.clt.AddressPairSet;
import io.netreduce.dataplane.clt.ConnectionTable;
import io.netreduce.dataplane.clt.FlowKey;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.ring.Ring;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import org.HdrHistogram.SingleWriterRecorder;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * The per-packet path's entry: classifies each received frame and routes it to where it is handled.
 * <p>
 * A frame follows one of these routes (docs/architecture.md walks through them):
 * <ol>
 *   <li>not RoCEv2, or RoCEv2 that belongs to no ring: sent on unchanged by {@link FrameOutput} (L4 checksum
 *       completed if the port flagged it partial);</li>
 *   <li>RC RDMA WRITE whose payload starts with the InetTag (a first packet): to the {@link Sequencer}, which
 *       checks it against its ring, records it in the CLT and hands it to the {@link Aggregator};</li>
 *   <li>other RC RDMA WRITE packets of a ring connection found in the CLT: to the {@link Sequencer}, which
 *       places them by PSN, then to the {@link Aggregator};</li>
 *   <li>anything invalid on a ring connection: dropped, counted under its reason.</li>
 * </ol>
 * Capture taps ({@link CaptureTaps}) see a port's frames as received and the dropped frames with their reason;
 * {@link FaultInjection} drops a configured share of RoCEv2 frames for drills.
 * <p>
 * Single-threaded and allocation-free per packet. Not thread-safe.
 */
public final class PacketProcessor implements FrameHandler
{
    private final DataplaneTables tables;
    private final Ring[] rings;
    private final ConnectionTable clt;
    private final AddressPairSet edges;
    private final ArrivingFrame arriving = new ArrivingFrame();
    private final CaptureTaps taps;
    private final FrameOutput output;
    private final Sequencer sequencer;
    private final AtomicCounter framesReceived;
    private final AtomicCounter cltMisses;
    private final AtomicCounter foreignTagOnRingEdge;
    private final ForeignTagEvents foreignTags;
    private FaultInjection faults = new FaultInjection(0.0, 0);

    /**
     * @param ports   the ports, by index.
     * @param peers   for each port index, the index of the port its frames leave on (itself for one-armed,
     *                the other port for bump-in-the-wire).
     * @param latency recorder of first-packet-in to results-out times, in nanoseconds.
     * @param foreignTags where connections on a ring edge without the ring's InetTag are reported.
     */
    public PacketProcessor(
        final DataplaneTables tables,
        final DataplaneCounters counters,
        final PacketPort[] ports,
        final int[] peers,
        final SingleWriterRecorder latency,
        final long highestLatency,
        final ForeignTagEvents foreignTags)
    {
        final PacketPort[] ownPorts = ports.clone();
        this.tables = tables;
        this.rings = tables.rings;
        this.clt = tables.clt;
        this.edges = tables.edges;
        this.taps = new CaptureTaps(ownPorts, counters);
        this.output = new FrameOutput(ownPorts, peers, counters, taps);
        this.sequencer = new Sequencer(tables, counters, output,
            new Aggregator(output, counters, latency, highestLatency));
        this.framesReceived = counters.counter(DataplaneCounter.FRAMES_RECEIVED);
        this.cltMisses = counters.counter(DataplaneCounter.CLT_MISSES);
        this.foreignTagOnRingEdge = counters.counter(DataplaneCounter.FOREIGN_TAG_ON_RING_EDGE);
        this.foreignTags = foreignTags;
    }

    /**
     * Drop each arriving RoCEv2 frame with the given probability before looking at it (tests and drills).
     */
    public void faultInjection(final double probability, final long seed)
    {
        this.faults = new FaultInjection(probability, seed);
    }

    public DataplaneTables tables()
    {
        return tables;
    }

    /**
     * Install a capture tap (between batches).
     *
     * @throws IllegalArgumentException if the tap's port does not exist, is already tapped, drops are already
     *                                  tapped, or a tap with the same id is installed.
     */
    public void installTap(final CaptureTap tap)
    {
        taps.install(tap);
    }

    /**
     * Remove a capture tap (between batches): no frame is copied into it afterwards.
     *
     * @return the removed tap.
     * @throws IllegalArgumentException if no tap has that id.
     */
    public CaptureTap removeTap(final int captureId)
    {
        return taps.remove(captureId);
    }

    /**
     * Set the port the next frames come from and the time stamp for their arrival (once per batch).
     */
    public void beginBatch(final int portIndex, final long nowNs)
    {
        arriving.beginBatch(portIndex, nowNs);
    }

    @Override
    public void onFrame(final MutableDirectBuffer buffer, final int offset, final int length, final int flags)
    {
        framesReceived.incrementRelease();
        final int status = arriving.arrive(buffer, offset, length, flags);
        taps.onArrival(arriving);
        if (status == RoceFrame.NOT_ROCE)
        {
            output.forward(arriving);
            return;
        }
        if (faults.shouldDrop())
        {
            output.drop(arriving, DataplaneCounter.DROP_INJECTED);
            return;
        }
        if (status == RoceFrame.OK && isRcWrite(arriving.frame().opcode()))
        {
            onWrite();
            return;
        }
        onOtherRoce(status);
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

    private static boolean isRcWrite(final int opcode)
    {
        return opcode >= Opcode.RDMA_WRITE_FIRST && opcode <= Opcode.RDMA_WRITE_ONLY_WITH_IMMEDIATE;
    }

    private static boolean isResponse(final int opcode)
    {
        return opcode == Opcode.ACKNOWLEDGE || opcode == Opcode.ATOMIC_ACKNOWLEDGE || opcode == Opcode.CNP ||
            (opcode >= Opcode.RDMA_READ_RESPONSE_FIRST && opcode <= Opcode.RDMA_READ_RESPONSE_ONLY);
    }

    private void reportForeignTag(final RoceFrame frame, final FlowKey key)
    {
        foreignTagOnRingEdge.incrementRelease();
        final MutableDirectBuffer buffer = arriving.buffer();
        final boolean longEnough = frame.payloadLength() >= InaHeader.LENGTH;
        foreignTags.offer(key, longEnough ? InaHeader.inetTag(buffer, frame.payloadOffset()) : 0,
            longEnough ? InaHeader.ringId(buffer, frame.payloadOffset()) : -1);
    }

    /**
     * RoCEv2 that is not a well-formed RC RDMA WRITE: responses pass; anything else on a ring connection (or a
     * broken frame on a ring edge) is dropped, since it would shift the PSN sequence the aggregation relies on
     * or reach a receiver that would take its payload for a result.
     */
    private void onOtherRoce(final int status)
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

    private void onWrite()
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
            sequencer.onDownFirst(arriving);
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
                // Learnt as foreign (so seen once per connection) and reported for the control side to log.
                sequencer.learnForeign(key, arriving.batchNs());
                reportForeignTag(frame, key);
                output.forward(arriving);
            }
            else
            {
                output.drop(arriving, DataplaneCounter.DROP_UNKNOWN_CONNECTION);
            }
            return;
        }
        if (clt.kind(slot) == ConnectionTable.KIND_FOREIGN)
        {
            clt.touch(slot, arriving.batchNs());
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
            sequencer.onDownPacket(arriving, slot);
            return;
        }
        sequencer.onRingPacket(arriving, slot);
    }
}
