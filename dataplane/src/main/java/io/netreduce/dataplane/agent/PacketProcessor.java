package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.aggregator.AggregatorRegion;
import io.netreduce.protocol.element.SumKernel;
import io.netreduce.dataplane.capture.CaptureTap;
import io.netreduce.dataplane.clt.AddressPairSet;
import io.netreduce.dataplane.clt.ConnectionTable;
import io.netreduce.dataplane.clt.IpKey;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.protocol.icrc.Crc32Combine;
import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.dataplane.ring.Ring;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.L4Checksum;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.wire.UdpHeader;
import org.HdrHistogram.SingleWriterRecorder;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;

import java.nio.ByteBuffer;
import java.util.SplittableRandom;

/**
 * The per-packet path: classify a frame, aggregate ring packets, emit results, pass everything else through.
 * <p>
 * A frame follows one of these routes (docs/architecture.md walks through them):
 * <ol>
 *   <li>not RoCEv2, or RoCEv2 that belongs to no ring: sent on unchanged (L4 checksum completed if the port
 *       flagged it partial);</li>
 *   <li>RC RDMA WRITE whose payload starts with the InetTag (a first packet): checked against the ring it names
 *       (size, ICRC, MsgLen, rank, membership of source and destination), recorded in the CLT, aggregated;</li>
 *   <li>other RC RDMA WRITE packets: found in the CLT; their message is the CLT's newest message plus
 *       floor((PSN - PSN0) / MsgLen), which must match the per-rank record of that message's PSN0;
 *       aggregated at position PSN - PSN0 of it;</li>
 *   <li>anything invalid on a ring connection: dropped, counted under its reason.</li>
 * </ol>
 * Aggregation is buffered and idempotent: each rank's payload and headers are stored; when every rank is
 * present the payloads are summed in rank order once, the result's CRC computed once, and one packet per rank
 * is rebuilt from that rank's headers with its ICRC combined from the stored header CRC. A packet for a
 * completed aggregator is answered with the stored result on its own connection.
 * <p>
 * Capture taps ({@link CaptureTap}) copy a port's received frames, as received, or the dropped frames with
 * their reason into a ring buffer; with no tap installed the cost is one null check per frame and per drop.
 * <p>
 * Single-threaded and allocation-free per packet. Not thread-safe.
 */
public final class PacketProcessor implements FrameHandler
{
    /** Largest frame a result can be: header slot + payload + ICRC. */
    private static final int TX_CAPACITY = AggregatorRegion.HEADER_SLOT + 4096 + 64;

    private final DataplaneTables tables;
    private final Ring[] rings;
    private final ConnectionTable clt;
    private final AddressPairSet edges;
    private final PacketPort[] ports;
    private final int[] peers;
    private final SingleWriterRecorder latency;
    private final long highestLatency;
    private final RoceFrame frame = new RoceFrame();
    private final Icrc frameIcrc = new Icrc();
    private final Icrc resultIcrc = new Icrc();
    private final UnsafeBuffer tx = new UnsafeBuffer(ByteBuffer.allocateDirect(TX_CAPACITY));

    private final AtomicCounter framesReceived;
    private final AtomicCounter framesSent;
    private final AtomicCounter txFull;
    private final AtomicCounter passThrough;
    private final AtomicCounter checksumCompleted;
    private final AtomicCounter ringPackets;
    private final AtomicCounter aggregationsCompleted;
    private final AtomicCounter resultPackets;
    private final AtomicCounter duplicatesAnswered;
    private final AtomicCounter duplicatesPending;
    private final AtomicCounter released;
    private final AtomicCounter ringRestarts;
    private final AtomicCounter cltInserts;
    private final AtomicCounter cltUpdates;
    private final AtomicCounter cltMisses;
    private final AtomicCounter cltForeign;
    private final AtomicCounter cltFull;
    private final AtomicCounter captured;
    private final AtomicCounter captureLost;
    private final DataplaneCounters counters;
    private final CaptureTap[] portTaps;
    private CaptureTap dropTap;

    private int inPort;
    private MutableDirectBuffer rxBuffer;
    private int rxOffset;
    private int rxLength;
    private long nowNs;
    private double dropProbability;
    private SplittableRandom dropRandom;

    /**
     * @param ports   the ports, by index.
     * @param peers   for each port index, the index of the port its frames leave on (itself for one-armed,
     *                the other port for bump-in-the-wire).
     * @param latency recorder of first-packet-in to results-out times, in nanoseconds.
     */
    public PacketProcessor(
        final DataplaneTables tables,
        final DataplaneCounters counters,
        final PacketPort[] ports,
        final int[] peers,
        final SingleWriterRecorder latency,
        final long highestLatency)
    {
        if (peers.length != ports.length)
        {
            throw new IllegalArgumentException("one peer per port needed: " + ports.length + " ports, " +
                peers.length + " peers");
        }
        for (final int peer : peers)
        {
            if (peer < 0 || peer >= ports.length)
            {
                throw new IllegalArgumentException("peer port " + peer + " does not exist");
            }
        }
        this.tables = tables;
        this.rings = tables.rings;
        this.clt = tables.clt;
        this.edges = tables.edges;
        this.ports = ports.clone();
        this.peers = peers.clone();
        this.latency = latency;
        this.highestLatency = highestLatency;
        this.counters = counters;
        framesReceived = counters.counter(DataplaneCounter.FRAMES_RECEIVED);
        framesSent = counters.counter(DataplaneCounter.FRAMES_SENT);
        txFull = counters.counter(DataplaneCounter.TX_FULL);
        passThrough = counters.counter(DataplaneCounter.PASS_THROUGH);
        checksumCompleted = counters.counter(DataplaneCounter.PASS_THROUGH_CHECKSUM_COMPLETED);
        ringPackets = counters.counter(DataplaneCounter.RING_PACKETS);
        aggregationsCompleted = counters.counter(DataplaneCounter.AGGREGATIONS_COMPLETED);
        resultPackets = counters.counter(DataplaneCounter.RESULT_PACKETS);
        duplicatesAnswered = counters.counter(DataplaneCounter.DUPLICATES_ANSWERED);
        duplicatesPending = counters.counter(DataplaneCounter.DUPLICATES_PENDING);
        released = counters.counter(DataplaneCounter.AGGREGATORS_RELEASED);
        ringRestarts = counters.counter(DataplaneCounter.RING_RESTARTS);
        cltInserts = counters.counter(DataplaneCounter.CLT_INSERTS);
        cltUpdates = counters.counter(DataplaneCounter.CLT_UPDATES);
        cltMisses = counters.counter(DataplaneCounter.CLT_MISSES);
        cltForeign = counters.counter(DataplaneCounter.CLT_FOREIGN);
        cltFull = counters.counter(DataplaneCounter.CLT_FULL);
        captured = counters.counter(DataplaneCounter.CAPTURED);
        captureLost = counters.counter(DataplaneCounter.CAPTURE_LOST);
        portTaps = new CaptureTap[ports.length];
    }

    /**
     * Drop each arriving RoCEv2 frame with the given probability before looking at it (tests and drills).
     */
    public void faultInjection(final double probability, final long seed)
    {
        this.dropProbability = probability;
        this.dropRandom = new SplittableRandom(seed);
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
        if (tap.port() >= ports.length)
        {
            throw new IllegalArgumentException("capture " + tap.id() + ": no port " + tap.port() + " (" +
                ports.length + " ports)");
        }
        if (findTap(tap.id()) != null)
        {
            throw new IllegalArgumentException("capture " + tap.id() + " is already installed");
        }
        if (tap.drops())
        {
            if (dropTap != null)
            {
                throw new IllegalArgumentException("drops are already captured by capture " + dropTap.id());
            }
            dropTap = tap;
        }
        else
        {
            if (portTaps[tap.port()] != null)
            {
                throw new IllegalArgumentException("port " + ports[tap.port()].name() +
                    " is already captured by capture " + portTaps[tap.port()].id());
            }
            portTaps[tap.port()] = tap;
        }
    }

    /**
     * Remove a capture tap (between batches): no frame is copied into it afterwards.
     *
     * @return the removed tap.
     * @throws IllegalArgumentException if no tap has that id.
     */
    public CaptureTap removeTap(final int captureId)
    {
        final CaptureTap tap = findTap(captureId);
        if (tap == null)
        {
            throw new IllegalArgumentException("no capture " + captureId + " is installed");
        }
        if (tap == dropTap)
        {
            dropTap = null;
        }
        else
        {
            portTaps[tap.port()] = null;
        }
        return tap;
    }

    private CaptureTap findTap(final int captureId)
    {
        if (dropTap != null && dropTap.id() == captureId)
        {
            return dropTap;
        }
        for (final CaptureTap tap : portTaps)
        {
            if (tap != null && tap.id() == captureId)
            {
                return tap;
            }
        }
        return null;
    }

    /**
     * Set the port the next frames come from and the time stamp for their arrival (once per batch).
     */
    public void beginBatch(final int portIndex, final long nowNs)
    {
        this.inPort = portIndex;
        this.nowNs = nowNs;
    }

    @Override
    public void onFrame(final MutableDirectBuffer buffer, final int offset, final int length, final int flags)
    {
        framesReceived.incrementRelease();
        rxBuffer = buffer;
        rxOffset = offset;
        rxLength = length;
        final CaptureTap tap = portTaps[inPort];
        if (tap != null)
        {
            // Before anything else: the capture shows the frame as received, before a checksum is completed.
            capture(tap, CaptureTap.NO_REASON);
        }
        final int status = frame.wrap(buffer, offset, length);
        if (status == RoceFrame.NOT_ROCE)
        {
            forward(buffer, offset, length, flags);
            return;
        }
        if (dropProbability > 0.0 && dropRandom.nextDouble() < dropProbability)
        {
            drop(DataplaneCounter.DROP_INJECTED);
            return;
        }
        if (status == RoceFrame.OK && isRcWrite(frame.opcode()))
        {
            onWrite(buffer, offset, length, flags);
            return;
        }
        onOtherRoce(buffer, offset, length, flags, status);
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

    private void onOtherRoce(
        final MutableDirectBuffer buffer, final int offset, final int length, final int flags, final int status)
    {
        final int addressOffset = frame.srcAddressOffset();
        final int addressLength = frame.addressLength();
        final long srcHigh = IpKey.high(buffer, addressOffset, addressLength);
        final long srcLow = IpKey.low(buffer, addressOffset, addressLength);
        final long dstHigh = IpKey.high(buffer, frame.dstAddressOffset(), addressLength);
        final long dstLow = IpKey.low(buffer, frame.dstAddressOffset(), addressLength);
        if (status == RoceFrame.TRUNCATED || status == RoceFrame.MALFORMED)
        {
            // The BTH may not be readable: judge by the addresses. A broken packet on a ring edge could be a
            // ring packet; never let it reach a receiver that would take its payload for a result.
            if (edges.contains(srcHigh, srcLow, dstHigh, dstLow))
            {
                drop(DataplaneCounter.DROP_MALFORMED);
                return;
            }
            forward(buffer, offset, length, flags);
            return;
        }
        final int slot = clt.find(srcHigh, srcLow, dstHigh, dstLow, frame.destQp());
        if (slot >= 0 && clt.kind(slot) == ConnectionTable.KIND_RING &&
            (status == RoceFrame.UNKNOWN_OPCODE || !isResponse(frame.opcode())))
        {
            // A ring QP carries RDMA WRITEs one way and responses (ACK, NAK, CNP) the other; any other request
            // would shift the PSN sequence the aggregator addressing relies on.
            drop(DataplaneCounter.DROP_UNEXPECTED_OPCODE);
            return;
        }
        forward(buffer, offset, length, flags);
    }

    private void onWrite(final MutableDirectBuffer buffer, final int offset, final int length, final int flags)
    {
        final int addressLength = frame.addressLength();
        final int srcOffset = frame.srcAddressOffset();
        final int dstOffset = frame.dstAddressOffset();
        final long srcHigh = IpKey.high(buffer, srcOffset, addressLength);
        final long srcLow = IpKey.low(buffer, srcOffset, addressLength);
        final long dstHigh = IpKey.high(buffer, dstOffset, addressLength);
        final long dstLow = IpKey.low(buffer, dstOffset, addressLength);
        final int qp = frame.destQp();
        final int opcode = frame.opcode();
        final boolean firstOpcode = Opcode.has(opcode, Opcode.IS_FIRST);
        final int payload = frame.payloadOffset();
        if (firstOpcode && frame.payloadLength() >= InaHeader.LENGTH &&
            InaHeader.inetTag(buffer, payload) == InaHeader.INET_TAG)
        {
            onTaggedFirst(buffer, offset, length, flags, srcHigh, srcLow, dstHigh, dstLow, qp);
            return;
        }
        final int slot = clt.find(srcHigh, srcLow, dstHigh, dstLow, qp);
        if (slot < 0)
        {
            cltMisses.incrementRelease();
            if (!edges.contains(srcHigh, srcLow, dstHigh, dstLow))
            {
                forward(buffer, offset, length, flags);
            }
            else if (firstOpcode)
            {
                learnForeign(srcHigh, srcLow, dstHigh, dstLow, qp);
                forward(buffer, offset, length, flags);
            }
            else
            {
                drop(DataplaneCounter.DROP_UNKNOWN_CONNECTION);
            }
            return;
        }
        if (clt.kind(slot) == ConnectionTable.KIND_FOREIGN)
        {
            forward(buffer, offset, length, flags);
            return;
        }
        if (firstOpcode)
        {
            drop(DataplaneCounter.DROP_MISSING_INA_HEADER);
            return;
        }
        onRingPacket(buffer, offset, slot);
    }

    private void learnForeign(
        final long srcHigh, final long srcLow, final long dstHigh, final long dstLow, final int qp)
    {
        final int slot = clt.insert(srcHigh, srcLow, dstHigh, dstLow, qp, ConnectionTable.KIND_FOREIGN);
        if (slot < 0)
        {
            cltFull.incrementRelease();
        }
        else
        {
            cltForeign.incrementRelease();
        }
    }

    private void onTaggedFirst(
        final MutableDirectBuffer buffer,
        final int offset,
        final int length,
        final int flags,
        final long srcHigh,
        final long srcLow,
        final long dstHigh,
        final long dstLow,
        final int qp)
    {
        final int ina = frame.payloadOffset();
        final Ring ring = rings[InaHeader.ringId(buffer, ina)];
        if (ring == null)
        {
            counters.increment(DataplaneCounter.PASS_THROUGH_UNKNOWN_RING);
            if (edges.contains(srcHigh, srcLow, dstHigh, dstLow))
            {
                final int slot = clt.find(srcHigh, srcLow, dstHigh, dstLow, qp);
                if (slot < 0)
                {
                    learnForeign(srcHigh, srcLow, dstHigh, dstLow, qp);
                }
                else
                {
                    clt.setForeign(slot);
                }
            }
            forward(buffer, offset, length, flags);
            return;
        }
        final int rank = InaHeader.rank(buffer, ina);
        final int msgId = InaHeader.msgId(buffer, ina);
        final int gradient = ina + InaHeader.LENGTH;
        if (frame.payloadLength() != ring.payloadSize() || frame.padCount() != 0)
        {
            drop(DataplaneCounter.DROP_WRONG_SIZE);
            return;
        }
        if (gradient - offset > AggregatorRegion.HEADER_SLOT)
        {
            drop(DataplaneCounter.DROP_MALFORMED);
            return;
        }
        final int headerCrc = frameIcrc.crcUpTo(frame, gradient);
        if (!icrcMatches(buffer, gradient, headerCrc, ring.shiftOperator(0)))
        {
            drop(DataplaneCounter.DROP_BAD_ICRC);
            return;
        }
        if (InaHeader.msgLen(buffer, ina) != ring.msgLen())
        {
            drop(DataplaneCounter.DROP_WRONG_MSG_LEN);
            return;
        }
        if (rank >= ring.ranks())
        {
            drop(DataplaneCounter.DROP_BAD_RANK);
            return;
        }
        final int opcode = frame.opcode();
        final boolean only = Opcode.has(opcode, Opcode.IS_LAST);
        if (only != (ring.msgLen() == 1))
        {
            drop(DataplaneCounter.DROP_OPCODE_MISMATCH);
            return;
        }
        final int successor = ring.successor(rank);
        if (!ring.isMember(rank, srcHigh, srcLow) || !ring.isMember(successor, dstHigh, dstLow) ||
            (ring.memberReceiveQp(successor) != RingMember.ANY && ring.memberReceiveQp(successor) != qp) ||
            (ring.memberMac(rank) != RingMember.ANY_MAC &&
                ring.memberMac(rank) != EthernetHeader.srcMac(buffer, offset)))
        {
            drop(DataplaneCounter.DROP_SPOOFED);
            return;
        }

        final int psn = frame.psn();
        int slot = clt.find(srcHigh, srcLow, dstHigh, dstLow, qp);
        final int age;
        if (slot < 0)
        {
            slot = clt.insert(srcHigh, srcLow, dstHigh, dstLow, qp, ConnectionTable.KIND_RING);
            if (slot < 0)
            {
                cltFull.incrementRelease();
                drop(DataplaneCounter.DROP_CLT_FULL);
                return;
            }
            cltInserts.incrementRelease();
            clt.setRing(slot, ring.id(), rank, msgId, psn, connect(ring, rank));
            age = 0;
        }
        else if (clt.kind(slot) != ConnectionTable.KIND_RING || clt.ring(slot) != ring.id() ||
            clt.rank(slot) != rank || !continuesPsnSequence(slot, msgId, psn, ring.msgLen()))
        {
            // Not this connection's PSN sequence: a new QP that got the same number as an old one (rxe hands
            // QP numbers out again) and a fresh random start PSN.
            cltUpdates.incrementRelease();
            clt.setRing(slot, ring.id(), rank, msgId, psn, connect(ring, rank));
            age = 0;
        }
        else if (clt.generation(slot) != ring.generation(rank) || !ring.inCurrentRun(rank))
        {
            // A retransmission on a connection that a newer one of the rank, or a newer run of the ring,
            // superseded: its aggregators are gone, and taking it for a new connection would end the new run.
            drop(DataplaneCounter.DROP_STALE_CONNECTION);
            return;
        }
        else
        {
            final int delta = (byte)(msgId - clt.msgId(slot));
            if (delta > 0)
            {
                cltUpdates.incrementRelease();
                clt.setLatest(slot, msgId, psn);
                age = 0;
            }
            else
            {
                // Same or older MsgID on this connection's PSN sequence (checked above): a go-back-N retransmission.
                // A retransmitted first packet (go-back-N): the CLT keeps its newest message.
                age = delta;
            }
        }
        if (age <= -ring.slots())
        {
            drop(DataplaneCounter.DROP_STALE_PACKET);
            return;
        }
        ring.recordMessageStart(rank, msgId, psn);
        // Results carry the result tag so the receiving worker can tell a sum from a message that passed through
        // unaggregated. The rank's stored header (and so its header CRC) is the marked one.
        InaHeader.inetTag(buffer, ina, InaHeader.RESULT_TAG);
        aggregate(ring, rank, msgId, 0, age, buffer, offset, gradient, frameIcrc.crcUpTo(frame, gradient));
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
     * A new connection carries {@code rank}; if it begins a new run of the ring, the previous run's aggregators
     * (its last N results, kept for retransmissions, and anything it left incomplete) are discarded.
     *
     * @return the connection's generation.
     */
    private int connect(final Ring ring, final int rank)
    {
        if (ring.connect(rank))
        {
            ring.region().freeAll();
            ringRestarts.incrementRelease();
        }
        return ring.generation(rank);
    }

    private void onRingPacket(final MutableDirectBuffer buffer, final int offset, final int slot)
    {
        final Ring ring = rings[clt.ring(slot)];
        final int rank = clt.rank(slot);
        if (clt.generation(slot) != ring.generation(rank) || !ring.inCurrentRun(rank))
        {
            drop(DataplaneCounter.DROP_STALE_CONNECTION);
            return;
        }
        final int psn = frame.psn();
        final int msgLen = ring.msgLen();
        final int delta = BthHeader.psnDelta(psn, clt.psn0(slot));
        final int age = Math.floorDiv(delta, msgLen);
        final int position = delta - age * msgLen;
        if (age >= 1)
        {
            drop(DataplaneCounter.DROP_FIRST_PACKET_LOST);
            return;
        }
        if (age <= -ring.slots())
        {
            drop(DataplaneCounter.DROP_STALE_PACKET);
            return;
        }
        final int opcode = frame.opcode();
        final boolean last = Opcode.has(opcode, Opcode.IS_LAST);
        if (position == 0 || last != (position == msgLen - 1))
        {
            drop(DataplaneCounter.DROP_OPCODE_MISMATCH);
            return;
        }
        if (frame.payloadLength() != ring.payloadSize() || frame.padCount() != 0)
        {
            drop(DataplaneCounter.DROP_WRONG_SIZE);
            return;
        }
        final int msgId = (clt.msgId(slot) + age) & 0xFF;
        final int arraySlot = msgId & (ring.slots() - 1);
        if (ring.slotMsg(rank, arraySlot) != msgId ||
            ring.slotPsn0(rank, arraySlot) != BthHeader.psnAdd(psn, -position))
        {
            drop(DataplaneCounter.DROP_STALE_PACKET);
            return;
        }
        final int gradient = frame.payloadOffset();
        if (gradient - offset > AggregatorRegion.HEADER_SLOT)
        {
            drop(DataplaneCounter.DROP_MALFORMED);
            return;
        }
        final int headerCrc = frameIcrc.crcUpTo(frame, gradient);
        if (!icrcMatches(buffer, gradient, headerCrc, ring.shiftOperator(position)))
        {
            drop(DataplaneCounter.DROP_BAD_ICRC);
            return;
        }
        aggregate(ring, rank, msgId, position, age, buffer, offset, gradient, headerCrc);
    }

    private boolean icrcMatches(
        final MutableDirectBuffer buffer, final int gradient, final int headerCrc, final int shiftOperator)
    {
        final int icrcOffset = frame.icrcOffset();
        final int payloadCrc = frameIcrc.crcOf(buffer, gradient, icrcOffset - gradient);
        return Crc32Combine.combineWithOperator(headerCrc, payloadCrc, shiftOperator) ==
            Icrc.read(buffer, icrcOffset);
    }

    private void aggregate(
        final Ring ring,
        final int rank,
        final int msgId,
        final int position,
        final int age,
        final MutableDirectBuffer buffer,
        final int offset,
        final int gradient,
        final int headerCrc)
    {
        final AggregatorRegion region = ring.region();
        final UnsafeBuffer memory = region.buffer();
        final int agg = region.offset(ring.aggregatorIndex(msgId, position));
        final int bound = region.boundMsg(agg);
        if (bound == AggregatorRegion.FREE)
        {
            if (age <= -ring.window())
            {
                // This rank has already started a message one window newer, so it has the result of this one,
                // and the aggregator was released by every rank: a late duplicate.
                drop(DataplaneCounter.DROP_STALE_PACKET);
                return;
            }
            region.bind(agg, msgId, nowNs);
        }
        else if (bound != msgId)
        {
            drop(age < 0 ? DataplaneCounter.DROP_STALE_PACKET : DataplaneCounter.DROP_AGGREGATOR_BUSY);
            return;
        }
        ringPackets.incrementRelease();
        final long bit = 1L << rank;
        releaseOneWindowBack(ring, region, msgId, position, bit);

        final int headerLength = gradient - offset;
        final int meta = region.rankMetaOffset(agg, rank);
        memory.putBytes(region.headerOffset(agg, rank), buffer, offset, headerLength);
        memory.putInt(meta + AggregatorRegion.META_HEADER_CRC, headerCrc);
        memory.putShort(meta + AggregatorRegion.META_HEADER_LENGTH, (short)headerLength);
        memory.putByte(meta + AggregatorRegion.META_PORT, (byte)inPort);
        memory.putByte(meta + AggregatorRegion.META_UDP_OFFSET, (byte)(frame.udpOffset() - offset));
        memory.putByte(meta + AggregatorRegion.META_L3_OFFSET, (byte)(frame.l3Offset() - offset));

        if (region.isComplete(agg))
        {
            duplicatesAnswered.incrementRelease();
            emitResult(ring, region, agg, rank, position);
            return;
        }
        final long arrived = region.arrived(agg);
        if ((arrived & bit) != 0)
        {
            duplicatesPending.incrementRelease();
        }
        memory.putBytes(region.payloadOffset(agg, rank), buffer, gradient, ring.gradientLength(position));
        final long nowArrived = arrived | bit;
        memory.putLong(agg + AggregatorRegion.ARRIVED_OFFSET, nowArrived);
        if (nowArrived == ring.fullMask())
        {
            complete(ring, region, agg, position);
        }
    }

    /**
     * The packet of {@code rank} for message m shows that the rank has the result of message m - N, so it no
     * longer needs that aggregator (paper: free the aggregator one window ahead, (m + N) % 2N, which is the
     * same slot). When every rank has moved past it the aggregator is free for message m + N.
     */
    private void releaseOneWindowBack(
        final Ring ring, final AggregatorRegion region, final int msgId, final int position, final long bit)
    {
        final int window = ring.window();
        final int older = (msgId - window) & 0xFF;
        final int agg = region.offset(ring.aggregatorIndex(older, position));
        if (region.boundMsg(agg) != older || !region.isComplete(agg))
        {
            return;
        }
        final long releasedBy = region.released(agg) | bit;
        if (releasedBy == ring.fullMask())
        {
            region.free(agg);
            released.incrementRelease();
        }
        else
        {
            region.buffer().putLong(agg + AggregatorRegion.RELEASED_OFFSET, releasedBy);
        }
    }

    private void complete(final Ring ring, final AggregatorRegion region, final int agg, final int position)
    {
        final int length = ring.gradientLength(position);
        final int result = region.resultOffset(agg);
        SumKernel.sum(ring.elementType(), region.segment(), region.payloadOffset(agg, 0), region.payloadSlot(),
            ring.ranks(), result, length);
        final UnsafeBuffer memory = region.buffer();
        memory.putInt(agg + AggregatorRegion.RESULT_CRC_OFFSET, resultIcrc.crcOf(memory, result, length));
        memory.putInt(agg + AggregatorRegion.STATE_OFFSET, AggregatorRegion.COMPLETE);
        aggregationsCompleted.incrementRelease();
        ring.completedCounter().incrementRelease();
        for (int rank = 0; rank < ring.ranks(); rank++)
        {
            emitResult(ring, region, agg, rank, position);
        }
        final long elapsed = System.nanoTime() - region.firstArrival(agg);
        latency.recordValue(Math.max(0, Math.min(elapsed, highestLatency)));
    }

    private void emitResult(
        final Ring ring, final AggregatorRegion region, final int agg, final int rank, final int position)
    {
        final UnsafeBuffer memory = region.buffer();
        final int meta = region.rankMetaOffset(agg, rank);
        final int headerLength = memory.getShort(meta + AggregatorRegion.META_HEADER_LENGTH);
        final int length = ring.gradientLength(position);
        tx.putBytes(0, memory, region.headerOffset(agg, rank), headerLength);
        tx.putBytes(headerLength, memory, region.resultOffset(agg), length);
        final int icrc = Crc32Combine.combineWithOperator(memory.getInt(meta + AggregatorRegion.META_HEADER_CRC),
            memory.getInt(agg + AggregatorRegion.RESULT_CRC_OFFSET), ring.shiftOperator(position));
        Icrc.put(tx, headerLength + length, icrc);
        final int udp = memory.getByte(meta + AggregatorRegion.META_UDP_OFFSET) & 0xFF;
        if (UdpHeader.checksum(tx, udp) != 0)
        {
            // RoCEv2 senders normally leave the UDP checksum 0; one that set it gets it right for the new payload.
            L4Checksum.writeUdp(tx, memory.getByte(meta + AggregatorRegion.META_L3_OFFSET) & 0xFF, udp);
        }
        final int port = memory.getByte(meta + AggregatorRegion.META_PORT);
        send(peers[port], tx, 0, headerLength + length + RoceFrame.ICRC_LENGTH);
        resultPackets.incrementRelease();
        ring.resultsCounter().incrementRelease();
    }

    private void forward(final MutableDirectBuffer buffer, final int offset, final int length, final int flags)
    {
        if ((flags & FrameHandler.FLAG_CHECKSUM_NOT_READY) != 0 && L4Checksum.completePartial(buffer, offset, length))
        {
            checksumCompleted.incrementRelease();
        }
        passThrough.incrementRelease();
        send(peers[inPort], buffer, offset, length);
    }

    private void send(final int port, final MutableDirectBuffer buffer, final int offset, final int length)
    {
        if (ports[port].send(buffer, offset, length))
        {
            framesSent.incrementRelease();
        }
        else
        {
            txFull.incrementRelease();
        }
    }

    /**
     * Drop the frame in hand: count it under its reason and show it to the drop capture, if one runs.
     */
    private void drop(final DataplaneCounter reason)
    {
        counters.increment(reason);
        final CaptureTap tap = dropTap;
        if (tap != null && tap.acceptsPort(inPort))
        {
            capture(tap, reason.ordinal());
        }
    }

    private void capture(final CaptureTap tap, final int reason)
    {
        if (tap.offer(rxBuffer, rxOffset, rxLength, inPort, reason, nowNs))
        {
            captured.incrementRelease();
        }
        else
        {
            captureLost.incrementRelease();
        }
    }
}
