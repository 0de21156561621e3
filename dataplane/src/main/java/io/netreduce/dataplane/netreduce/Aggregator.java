package io.netreduce.dataplane.netreduce;

import io.netreduce.dataplane.frame.ArrivingFrame;
import io.netreduce.dataplane.frame.FrameOutput;

import io.netreduce.dataplane.aggregator.AggregatorRegion;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.ring.Ring;
import io.netreduce.protocol.element.SumKernel;
import io.netreduce.protocol.icrc.Crc32Combine;
import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.wire.Ecn;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.L4Checksum;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.wire.UdpHeader;
import org.HdrHistogram.SingleWriterRecorder;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * The aggregation stage: given a ring packet that the {@link Sequencer} placed (ring, rank, message, position),
 * it stores the rank's headers and payload in the position's aggregator, releases the aggregator one window back
 * that this packet shows the rank no longer needs, sums the payloads once every rank is present, and emits one
 * result per rank. A packet for an aggregator that is already complete (a retransmission) is answered with the
 * stored result on its own connection.
 * <p>
 * Results are built in place in the transmit slot of the port they leave on (stored headers, then the sum, then
 * the ICRC combined from the stored header CRC and the result CRC), so a result is written once.
 * <p>
 * Single-threaded and allocation-free per packet.
 */
final class Aggregator
{
    private final FrameOutput output;
    private final SingleWriterRecorder latency;
    private final long highestLatency;
    private final Icrc resultIcrc = new Icrc();
    private final AtomicCounter ringPackets;
    private final AtomicCounter aggregationsCompleted;
    private final AtomicCounter resultPackets;
    private final AtomicCounter duplicatesAnswered;
    private final AtomicCounter duplicatesPending;
    private final AtomicCounter released;
    private final AtomicCounter upPackets;
    private final AtomicCounter upRepeated;
    private final AtomicCounter downResults;
    private final AtomicCounter downRepeated;
    private final AtomicCounter ceReceived;
    private final AtomicCounter ceSent;
    private final AtomicCounter ceQueue;

    /**
     * @param latency recorder of first-packet-in to results-out times, in nanoseconds, capped at
     *                {@code highestLatency}.
     */
    Aggregator(
        final FrameOutput output,
        final DataplaneCounters counters,
        final SingleWriterRecorder latency,
        final long highestLatency)
    {
        this.output = output;
        this.latency = latency;
        this.highestLatency = highestLatency;
        ringPackets = counters.counter(DataplaneCounter.RING_PACKETS);
        aggregationsCompleted = counters.counter(DataplaneCounter.AGGREGATIONS_COMPLETED);
        resultPackets = counters.counter(DataplaneCounter.RESULT_PACKETS);
        duplicatesAnswered = counters.counter(DataplaneCounter.DUPLICATES_ANSWERED);
        duplicatesPending = counters.counter(DataplaneCounter.DUPLICATES_PENDING);
        released = counters.counter(DataplaneCounter.AGGREGATORS_RELEASED);
        upPackets = counters.counter(DataplaneCounter.UP_PACKETS);
        upRepeated = counters.counter(DataplaneCounter.UP_REPEATED);
        downResults = counters.counter(DataplaneCounter.DOWN_RESULTS);
        downRepeated = counters.counter(DataplaneCounter.DOWN_REPEATED);
        ceReceived = counters.counter(DataplaneCounter.ECN_CE_RECEIVED);
        ceSent = counters.counter(DataplaneCounter.ECN_CE_SENT);
        ceQueue = counters.counter(DataplaneCounter.ECN_CE_QUEUE);
    }

    /**
     * Aggregate the frame in hand.
     *
     * @param age       message age relative to the rank's newest message: 0 for the newest, negative for older
     *                  ones still within the window (go-back-N retransmissions).
     * @param gradient  offset of the gradient bytes in the frame's buffer (everything before is stored as the
     *                  rank's header).
     * @param headerCrc CRC of the masked headers up to {@code gradient}, as the result will carry them.
     */
    void aggregate(
        final ArrivingFrame arriving,
        final Ring ring,
        final int rank,
        final int msgId,
        final int position,
        final int age,
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
                output.drop(arriving, DataplaneCounter.DROP_STALE_PACKET);
                return;
            }
            region.bind(agg, msgId, arriving.batchNs());
        }
        else if (bound != msgId)
        {
            output.drop(arriving, age < 0 ? DataplaneCounter.DROP_STALE_PACKET : DataplaneCounter.DROP_AGGREGATOR_BUSY);
            return;
        }
        ringPackets.incrementRelease();
        // PANAMA §4.2: the ECN fields of the position's packets are OR-ed (CE kept), and every packet the position
        // sends carries CE from then on, so a mark on any rank's path reaches every rank with its result. A
        // retransmission's mark counts too: it is a congestion signal from the same path.
        recordEcn(region, agg, arriving);
        final long bit = 1L << rank;
        if (!ring.isLeaf())
        {
            releaseOneWindowBack(ring, region, msgId, position, bit);
        }

        final MutableDirectBuffer buffer = arriving.buffer();
        final int offset = arriving.offset();
        final RoceFrame frame = arriving.frame();
        final int headerLength = gradient - offset;
        final int meta = region.rankMetaOffset(agg, rank);
        memory.putBytes(region.headerOffset(agg, rank), buffer, offset, headerLength);
        if (frame.ipVersion() == 4)
        {
            // Results over IPv4 carry no UDP checksum (0, as RoCEv2 senders send; the ICRC, which masks the field,
            // protects the packet), whatever this one had: a sender's kernel that segmented its frames filled one
            // in, and one computed over each 4 KiB result would cost as much as the sum itself.
            memory.putShort(region.headerOffset(agg, rank) + frame.udpOffset() - offset + UdpHeader.CHECKSUM_OFFSET,
                (short)0);
        }
        memory.putInt(meta + AggregatorRegion.META_HEADER_CRC, headerCrc);
        memory.putShort(meta + AggregatorRegion.META_HEADER_LENGTH, (short)headerLength);
        memory.putByte(meta + AggregatorRegion.META_PORT, (byte)arriving.port());
        memory.putByte(meta + AggregatorRegion.META_UDP_OFFSET, (byte)(frame.udpOffset() - offset));
        memory.putByte(meta + AggregatorRegion.META_L3_OFFSET, (byte)(frame.l3Offset() - offset));

        if (region.isComplete(agg))
        {
            if (ring.sendsUp(rank))
            {
                // A leaf's last rank resends: its own result reaches the next rack through the spine, which answers
                // the partial sent up again from its stored result.
                upRepeated.incrementRelease();
                emitUp(ring, region, agg, position);
                return;
            }
            duplicatesAnswered.incrementRelease();
            emitResult(ring, region, agg, rank, position);
            return;
        }
        if (region.isPartial(agg))
        {
            // A leaf holds its rack's sum but not yet the spine's result (the partial or the result was lost on the
            // spine's links): the retransmission sends the partial up again, and the spine answers it.
            upRepeated.incrementRelease();
            emitUp(ring, region, agg, position);
            return;
        }
        final long arrived = region.arrived(agg);
        if ((arrived & bit) != 0)
        {
            duplicatesPending.incrementRelease();
        }
        else
        {
            // Only a new contribution is progress: a rank whose peers are gone resends its window for ever, and
            // if its duplicates counted, the abandoned run would never let the next job in.
            ring.runs().progress(arriving.batchNs());
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
        final int older = (msgId - ring.window()) & 0xFF;
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
        if (ring.isLeaf())
        {
            completePartial(ring, region, agg, position);
            return;
        }
        region.markComplete(agg);
        ring.runs().onSumCompleted();
        aggregationsCompleted.incrementRelease();
        ring.completedCounter().incrementRelease();
        for (int rank = 0; rank < ring.ranks(); rank++)
        {
            if (!ring.macs().isMacBound(rank))
            {
                // The rank's connection took part in a completed sum: evidence for binding its source MAC.
                ring.macs().onSumFrom(rank, EthernetHeader.srcMac(memory, region.headerOffset(agg, rank)));
            }
            emitResult(ring, region, agg, rank, position);
        }
        final long elapsed = System.nanoTime() - region.firstArrival(agg);
        latency.recordValue(Math.max(0, Math.min(elapsed, highestLatency)));
    }

    /**
     * A leaf's rack sum is in the result slot: it stays there (to be sent up again for a retransmission) and goes
     * up now as one packet on the rack's leaving cross-rack connection, built from the last rank's stored headers
     * (its own PSN, QP and addresses, the request tag kept). The aggregator stays in flight until the spine's
     * result comes down ({@link #onDown}).
     */
    private void completePartial(final Ring ring, final AggregatorRegion region, final int agg, final int position)
    {
        region.markPartial(agg);
        ring.runs().onSumCompleted();
        final UnsafeBuffer memory = region.buffer();
        for (int rank = 0; rank < ring.ranks(); rank++)
        {
            if (!ring.macs().isMacBound(rank))
            {
                ring.macs().onSumFrom(rank, EthernetHeader.srcMac(memory, region.headerOffset(agg, rank)));
            }
        }
        emitUp(ring, region, agg, position);
    }

    /**
     * A leaf receives the spine's result for (message, position) on its entering cross-rack connection; the
     * Sequencer has checked and placed it ({@code gradient}: where its payload starts, {@code payloadCrc}: that
     * payload's CRC-32). The first time, the result is stored in the aggregator's final slot, translated onto every
     * connection of the rack but the leaving one (whose result the next leaf delivers), and the packet itself goes
     * on to the rack's first rank: it is that connection's own result, ICRC recomputed by the spine. A repeat (the
     * spine answering a partial sent up again) goes on to the first rank only, and only if it is the stored result.
     * The aggregator array is not summed into.
     */
    void onDown(
        final ArrivingFrame arriving,
        final Ring ring,
        final int msgId,
        final int position,
        final int gradient,
        final int payloadCrc)
    {
        final AggregatorRegion region = ring.region();
        final UnsafeBuffer memory = region.buffer();
        final int agg = region.offset(ring.aggregatorIndex(msgId, position));
        final boolean partial = region.isPartial(agg);
        if (region.boundMsg(agg) != msgId || !(partial || region.isComplete(agg)))
        {
            // Not a sum this leaf sent up (released since, or never complete here): nothing to translate, and
            // passing it on unchecked could hand the first rank something that is not its result.
            output.drop(arriving, DataplaneCounter.DROP_DOWN_NOT_AWAITED);
            return;
        }
        final int length = ring.gradientLength(position);
        final int fin = region.finalOffset(agg);
        final MutableDirectBuffer buffer = arriving.buffer();
        if (!partial)
        {
            if (memory.getInt(agg + AggregatorRegion.FINAL_CRC_OFFSET) != payloadCrc ||
                !sameBytes(memory, fin, buffer, gradient, length))
            {
                output.drop(arriving, DataplaneCounter.DROP_DOWN_MISMATCH);
                return;
            }
            downRepeated.incrementRelease();
            recordEcn(region, agg, arriving);
            forwardDown(arriving, region, agg);
            return;
        }
        // The spine's result carries the OR of every rack's partial and of its links' marks; the rack's own marks
        // are in the aggregator already. Both go down to every rank of the rack.
        recordEcn(region, agg, arriving);
        memory.putBytes(fin, buffer, gradient, length);
        memory.putInt(agg + AggregatorRegion.FINAL_CRC_OFFSET, payloadCrc);
        region.markComplete(agg);
        releaseBySpine(ring, region, msgId, position);
        if (!ring.macs().isMacBound(ring.downMacIndex()))
        {
            // A result for a sum this leaf sent up: evidence for binding the source MAC the spine's results carry.
            ring.macs().onSumFrom(ring.downMacIndex(), EthernetHeader.srcMac(buffer, arriving.offset()));
        }
        downResults.incrementRelease();
        aggregationsCompleted.incrementRelease();
        ring.completedCounter().incrementRelease();
        for (int rank = 0; rank < ring.ranks() - 1; rank++)
        {
            emitResult(ring, region, agg, rank, position);
        }
        forwardDown(arriving, region, agg);
        final long elapsed = System.nanoTime() - region.firstArrival(agg);
        latency.recordValue(Math.max(0, Math.min(elapsed, highestLatency)));
    }

    /**
     * A CE mark from the path, or the appliance's own ({@link ArrivingFrame#queueMarks}: a switch's AQM marks on its
     * queue).
     */
    private void recordEcn(final AggregatorRegion region, final int agg, final ArrivingFrame arriving)
    {
        final int ecn = arriving.frame().ecn();
        if (ecn == Ecn.CE)
        {
            ceReceived.incrementRelease();
            region.recordEcn(agg, ecn);
        }
        else if (arriving.queueMarks(ecn))
        {
            ceQueue.incrementRelease();
            region.recordEcn(agg, Ecn.CE);
        }
    }

    /**
     * The spine's result goes on to the rack's first rank as it came, but marked CE when the position's aggregator
     * holds a mark (a rack's rank was marked, and the result came down unmarked).
     */
    private void forwardDown(final ArrivingFrame arriving, final AggregatorRegion region, final int agg)
    {
        if (region.congestionExperienced(agg))
        {
            Ecn.markCe(arriving.buffer(), arriving.frame().l3Offset());
            ceSent.incrementRelease();
        }
        output.forward(arriving);
    }

    /**
     * A leaf frees its aggregator of message m - N when the spine's result of m arrives. Its own ranks' packets of
     * m prove only that they hold the result of m - N, not that the rank after the rack (in the next rack) does:
     * freed on that alone, the aggregator would drop the last rank's retransmission of m - N as stale, and the
     * spine, which still holds the answer, would never see it. The spine's result of m proves that every leaf sent
     * its partial of m, so that every rank of the ring sent m and holds the whole result of m - N.
     */
    private void releaseBySpine(final Ring ring, final AggregatorRegion region, final int msgId, final int position)
    {
        final int older = (msgId - ring.window()) & 0xFF;
        final int agg = region.offset(ring.aggregatorIndex(older, position));
        if (region.boundMsg(agg) == older && region.isComplete(agg))
        {
            region.free(agg);
            released.incrementRelease();
        }
    }

    private static boolean sameBytes(
        final UnsafeBuffer memory, final int offset, final MutableDirectBuffer buffer, final int other, final int length)
    {
        int i = 0;
        for (; i + Long.BYTES <= length; i += Long.BYTES)
        {
            if (memory.getLong(offset + i) != buffer.getLong(other + i))
            {
                return false;
            }
        }
        for (; i < length; i++)
        {
            if (memory.getByte(offset + i) != buffer.getByte(other + i))
            {
                return false;
            }
        }
        return true;
    }

    /**
     * Send a leaf's rack sum (the result slot) up on the last rank's connection.
     */
    private void emitUp(final Ring ring, final AggregatorRegion region, final int agg, final int position)
    {
        if (emit(ring, region, agg, ring.ranks() - 1, position, region.resultOffset(agg),
            region.buffer().getInt(agg + AggregatorRegion.RESULT_CRC_OFFSET)))
        {
            upPackets.incrementRelease();
        }
    }

    /**
     * Send the ring's result to {@code rank}'s connection: the sum (flat, spine) or the spine's result (leaf).
     */
    private void emitResult(
        final Ring ring, final AggregatorRegion region, final int agg, final int rank, final int position)
    {
        final boolean leaf = region.hasFinal();
        final int payload = leaf ? region.finalOffset(agg) : region.resultOffset(agg);
        final int crc = region.buffer().getInt(agg +
            (leaf ? AggregatorRegion.FINAL_CRC_OFFSET : AggregatorRegion.RESULT_CRC_OFFSET));
        if (emit(ring, region, agg, rank, position, payload, crc))
        {
            resultPackets.incrementRelease();
            ring.resultsCounter().incrementRelease();
        }
    }

    /**
     * Build a packet on rank's connection straight into a transmit slot: its stored headers, the payload at
     * {@code payload}, and the ICRC combined from the stored header CRC and the payload's CRC (no pass over the
     * frame).
     *
     * @return whether it was sent (a full transmit ring is counted; a retransmission is answered again).
     */
    private boolean emit(
        final Ring ring,
        final AggregatorRegion region,
        final int agg,
        final int rank,
        final int position,
        final int payload,
        final int payloadCrc)
    {
        final UnsafeBuffer memory = region.buffer();
        final int meta = region.rankMetaOffset(agg, rank);
        final int headerLength = memory.getShort(meta + AggregatorRegion.META_HEADER_LENGTH);
        final int length = ring.gradientLength(position);
        final int arrivalPort = memory.getByte(meta + AggregatorRegion.META_PORT);
        final int index = output.claim(arrivalPort, headerLength + length + RoceFrame.ICRC_LENGTH);
        if (index < 0)
        {
            // Counted as a full transmit ring; the rank's retransmission is answered from the stored result.
            return false;
        }
        final MutableDirectBuffer tx = output.claimBuffer(arrivalPort);
        tx.putBytes(index, memory, region.headerOffset(agg, rank), headerLength);
        if (region.congestionExperienced(agg))
        {
            // The rank's own header keeps its ECN codepoint (ECT(0)/ECT(1) as it sent it) unless the position saw
            // CE; the ICRC masks the field, so the combined ICRC below stays valid.
            Ecn.markCe(tx, index + (memory.getByte(meta + AggregatorRegion.META_L3_OFFSET) & 0xFF));
            ceSent.incrementRelease();
        }
        tx.putBytes(index + headerLength, memory, payload, length);
        final int icrc = Crc32Combine.combineWithOperator(memory.getInt(meta + AggregatorRegion.META_HEADER_CRC),
            payloadCrc, ring.shiftOperator(position));
        Icrc.put(tx, index + headerLength + length, icrc);
        final int udp = index + (memory.getByte(meta + AggregatorRegion.META_UDP_OFFSET) & 0xFF);
        if (UdpHeader.checksum(tx, udp) != 0)
        {
            // RoCEv2 senders normally leave the UDP checksum 0; one that set it gets it right for the new payload.
            L4Checksum.writeUdp(tx, index + (memory.getByte(meta + AggregatorRegion.META_L3_OFFSET) & 0xFF), udp);
        }
        output.commit(arrivalPort);
        return true;
    }
}
