package io.netreduce.host.rc;

import io.netreduce.protocol.wire.AethHeader;
import io.netreduce.protocol.wire.ImmDtHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RethHeader;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.writer.RoceFrameWriter;
import org.agrona.BitUtil;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import static io.netreduce.protocol.wire.BthHeader.psnAdd;
import static io.netreduce.protocol.wire.BthHeader.psnDelta;

/**
 * The responder half of a {@link QueuePair}: the receive queue, the expected PSN, placement of RDMA WRITEs and
 * SENDs, and the responses (ACK, NAK, RNR NAK, CNP).
 * <p>
 * Requests are accepted only at the expected PSN. Earlier PSNs are duplicates: re-ACKed, never re-applied.
 * Later PSNs are a gap: the first one is NAKed (PSN sequence error) and no further NAK is sent until the expected
 * PSN arrives. RDMA WRITEs are checked against the {@link MemoryRegistry} (R_Key, VA and length) and placed in
 * order; SENDs fill the next posted receive. ACKs are coalesced: one per duty cycle when a packet asked for one
 * (AckReq), otherwise after {@link RcConfig#ackCoalescePackets()} packets or {@link RcConfig#ackCoalesceDelayNs()}.
 * A CE-marked request makes the responder send a CNP, at most one per {@link RcConfig#cnpIntervalNs()} (unless
 * {@link QueuePair#congestionNotification(boolean) turned off}), and a receive completion reports how many packets
 * of its message were marked ({@link Completion#markedPackets()} of {@link Completion#packets()}).
 * <p>
 * Single-threaded: driven by the endpoint's duty cycle through its queue pair.
 */
final class Responder
{
    private static final int NONE = 0;
    private static final int IN_WRITE = 1;
    private static final int IN_SEND = 2;
    private static final int NO_NAK = -1;
    private static final DirectBuffer CNP_PAYLOAD = new UnsafeBuffer(new byte[Opcode.CNP_RESERVED_LENGTH]);

    private final QueuePair qp;
    private final RcEndpoint endpoint;
    private final RcConfig config;
    private final CompletionQueue recvCq;
    private final RoceFrameWriter writer;
    private final QpCounters counters;

    private final int rqMask;
    private final long[] rqWrId;
    private final MemoryRegion[] rqRegion;
    private final int[] rqOffset;
    private final int[] rqLength;
    private long rqPosted;
    private long rqConsumed;

    private int expectedPsn;
    private int msn;
    private boolean nakOutstanding;
    private boolean ackPending;
    private boolean ackNow;
    private int packetsSinceAck;
    private long ackPendingSinceNs;
    private int pendingNakSyndrome = NO_NAK;
    private int pendingNakPsn;
    private boolean cnpPending;
    private boolean sendsCnps = true;
    /** Packets of the message being received that arrived CE-marked, and all of them (its receive completion's). */
    private int messageMarkedPackets;
    private int messagePackets;
    private boolean cnpEverSent;
    private long lastCnpNs;
    private int inMessage = NONE;
    private MemoryRegion writeRegion;
    private long writeOffset;
    private long writeRemaining;
    private int messageBytes;

    Responder(final QueuePair qp, final RcEndpoint endpoint, final RcConfig config, final CompletionQueue recvCq,
        final RoceFrameWriter writer, final QpCounters counters)
    {
        this.qp = qp;
        this.endpoint = endpoint;
        this.config = config;
        this.recvCq = recvCq;
        this.writer = writer;
        this.counters = counters;
        final int rqSize = BitUtil.findNextPositivePowerOfTwo(config.receiveQueueDepth());
        rqMask = rqSize - 1;
        rqWrId = new long[rqSize];
        rqRegion = new MemoryRegion[rqSize];
        rqOffset = new int[rqSize];
        rqLength = new int[rqSize];
    }

    /**
     * @param sends whether a CE-marked request makes this responder send CNPs (DCQCN's notification point; on by
     *              default). Off where the application reacts to the marks itself, from its receive completions.
     */
    void sendsCnps(final boolean sends)
    {
        this.sendsCnps = sends;
    }

    void expectedPsn(final int psn)
    {
        expectedPsn = psn;
    }

    int expectedPsn()
    {
        return expectedPsn;
    }

    int postedReceives()
    {
        return (int)(rqPosted - rqConsumed);
    }

    /**
     * @return {@link QueuePair#POST_OK} or why the receive was refused (state checked by the caller).
     */
    int postRecv(final long wrId, final MemoryRegion region, final int offset, final int length)
    {
        if (rqPosted - rqConsumed > rqMask)
        {
            return QueuePair.POST_QUEUE_FULL;
        }
        if (region == null || offset < 0 || length < 0 || (long)offset + length > region.length())
        {
            return QueuePair.POST_INVALID;
        }
        final int index = (int)(rqPosted & rqMask);
        rqWrId[index] = wrId;
        rqRegion[index] = region;
        rqOffset[index] = offset;
        rqLength[index] = length;
        rqPosted++;
        return QueuePair.POST_OK;
    }

    /**
     * A request (SEND or RDMA WRITE) from the peer's requester.
     */
    void onRequest(final RoceFrame frame, final long nowNs)
    {
        final boolean marked = frame.ecn() == Ipv4Header.ECN_CE;
        if (marked)
        {
            onCongestionExperienced(nowNs);
        }
        if (!isExpected(frame.psn()))
        {
            return;
        }
        if (frame.has(Opcode.IS_FIRST))
        {
            messageMarkedPackets = 0;
            messagePackets = 0;
        }
        final int opcode = frame.opcode();
        final boolean first = frame.has(Opcode.IS_FIRST);
        final boolean isWrite = opcode >= Opcode.RDMA_WRITE_FIRST;
        if (first != (inMessage == NONE) || (!first && (inMessage == IN_WRITE) != isWrite))
        {
            queueFatalNak(AethHeader.NAK_INVALID_REQUEST, frame.psn());
            return;
        }
        final boolean last = frame.has(Opcode.IS_LAST);
        final boolean needsReceive = !isWrite || frame.has(Opcode.HAS_IMMDT);
        if (last && needsReceive && !recvCq.hasSpace())
        {
            counters.completionQueueFull++;
            return; // not acknowledged: the requester will send it again
        }
        final boolean placed = isWrite ? placeWrite(frame, first, last, needsReceive) : placeSend(frame, first, last);
        if (!placed)
        {
            return;
        }
        // counted once accepted: a packet refused here (no receive, a full completion queue) comes again
        messagePackets++;
        if (marked)
        {
            messageMarkedPackets++;
        }
        final int payloadLength = frame.payloadLength();
        messageBytes += payloadLength;
        counters.bytesReceived += payloadLength;
        if (last)
        {
            completeMessage(frame, isWrite, needsReceive);
        }
        accept(frame, nowNs);
    }

    /**
     * A CE-marked request: queue a CNP, at most one per {@link RcConfig#cnpIntervalNs()}.
     */
    private void onCongestionExperienced(final long nowNs)
    {
        counters.ecnMarked++;
        if (sendsCnps && (!cnpEverSent || nowNs - lastCnpNs >= config.cnpIntervalNs()))
        {
            cnpEverSent = true;
            lastCnpNs = nowNs;
            cnpPending = true;
        }
    }

    /**
     * Whether the request carries the expected PSN. A duplicate is re-ACKed (so a requester that lost our ACK
     * stops retransmitting) and never re-applied; the first packet past a gap is NAKed once, at once, so the
     * requester goes back without waiting for its timeout.
     */
    private boolean isExpected(final int psn)
    {
        final int delta = psnDelta(psn, expectedPsn);
        if (delta < 0)
        {
            counters.duplicates++;
            ackNow = true;
            return false;
        }
        if (delta > 0)
        {
            counters.outOfSequence++;
            if (!nakOutstanding)
            {
                nakOutstanding = true;
                pendingNakSyndrome = AethHeader.syndrome(AethHeader.TYPE_NAK, AethHeader.NAK_PSN_SEQUENCE_ERROR);
                pendingNakPsn = expectedPsn;
            }
            return false;
        }
        return true;
    }

    /**
     * Place an RDMA WRITE packet in the memory region its first packet's RETH named.
     *
     * @return false if the packet was refused (a NAK is queued).
     */
    private boolean placeWrite(final RoceFrame frame, final boolean first, final boolean last,
        final boolean needsReceive)
    {
        final DirectBuffer buffer = frame.buffer();
        final int psn = frame.psn();
        final int payloadLength = frame.payloadLength();
        if (first)
        {
            final int reth = frame.extensionOffset();
            final long va = RethHeader.virtualAddress(buffer, reth);
            final int rkey = RethHeader.rkey(buffer, reth);
            final long dmaLength = RethHeader.dmaLength(buffer, reth);
            final MemoryRegion region = endpoint.memory().lookup(rkey);
            if (region == null || !region.contains(va, dmaLength))
            {
                queueFatalNak(AethHeader.NAK_REMOTE_ACCESS_ERROR, psn);
                return false;
            }
            writeRegion = region;
            writeOffset = va - region.virtualAddress();
            writeRemaining = dmaLength;
            messageBytes = 0;
        }
        if (payloadLength > writeRemaining || (last && payloadLength != writeRemaining))
        {
            queueFatalNak(AethHeader.NAK_INVALID_REQUEST, psn);
            return false;
        }
        if (last && needsReceive && rqConsumed == rqPosted)
        {
            queueRnrNak(psn);
            return false;
        }
        writeRegion.buffer().putBytes((int)writeOffset, buffer, frame.payloadOffset(), payloadLength);
        writeOffset += payloadLength;
        writeRemaining -= payloadLength;
        inMessage = last ? NONE : IN_WRITE;
        return true;
    }

    /**
     * Place a SEND packet in the next posted receive.
     *
     * @return false if the packet was refused (a NAK is queued).
     */
    private boolean placeSend(final RoceFrame frame, final boolean first, final boolean last)
    {
        final int psn = frame.psn();
        final int payloadLength = frame.payloadLength();
        if (first)
        {
            if (rqConsumed == rqPosted)
            {
                queueRnrNak(psn);
                return false;
            }
            messageBytes = 0;
        }
        final int index = (int)(rqConsumed & rqMask);
        if ((long)messageBytes + payloadLength > rqLength[index])
        {
            recvCq.offer(rqWrId[index], CompletionStatus.LOCAL_LENGTH_ERROR, Completion.OP_RECV, messageBytes,
                false, 0, qp.qpn());
            rqRegion[index] = null;
            rqConsumed++;
            queueFatalNak(AethHeader.NAK_INVALID_REQUEST, psn);
            return false;
        }
        rqRegion[index].buffer().putBytes(rqOffset[index] + messageBytes, frame.buffer(), frame.payloadOffset(),
            payloadLength);
        inMessage = last ? NONE : IN_SEND;
        return true;
    }

    /**
     * The last packet of a message is in: count the message and, for a SEND or a WRITE WITH IMMEDIATE, complete
     * the receive it consumed.
     */
    private void completeMessage(final RoceFrame frame, final boolean isWrite, final boolean needsReceive)
    {
        msn = (msn + 1) & 0xFF_FFFF;
        if (needsReceive)
        {
            final int index = (int)(rqConsumed & rqMask);
            final boolean hasImm = frame.has(Opcode.HAS_IMMDT);
            final int imm = hasImm ?
                ImmDtHeader.immediate(frame.buffer(), frame.bthOffset() + Opcode.immDtOffset(frame.opcode())) : 0;
            recvCq.offer(rqWrId[index], CompletionStatus.SUCCESS,
                isWrite ? Completion.OP_RECV_RDMA_WITH_IMM : Completion.OP_RECV, messageBytes, hasImm, imm, qp.qpn(),
                messageMarkedPackets, messagePackets);
            rqRegion[index] = null;
            rqConsumed++;
        }
    }

    /**
     * The packet was applied: expect the next PSN and schedule the (coalesced) ACK.
     */
    private void accept(final RoceFrame frame, final long nowNs)
    {
        expectedPsn = psnAdd(expectedPsn, 1);
        nakOutstanding = false;
        if (!ackPending)
        {
            ackPending = true;
            ackPendingSinceNs = nowNs;
        }
        packetsSinceAck++;
        if (frame.ackRequest() || packetsSinceAck >= config.ackCoalescePackets())
        {
            ackNow = true;
        }
    }

    private void queueRnrNak(final int psn)
    {
        // Receiver not ready: the requester waits and resends from this PSN; the packets already behind it are a
        // gap we must not NAK again.
        counters.rnrNaksSent++;
        nakOutstanding = true;
        pendingNakSyndrome = AethHeader.syndrome(AethHeader.TYPE_RNR_NAK, 0);
        pendingNakPsn = psn;
    }

    /**
     * Answer a request this queue pair cannot serve with a fatal NAK, and fail the queue pair.
     */
    void queueFatalNak(final int code, final int psn)
    {
        pendingNakSyndrome = AethHeader.syndrome(AethHeader.TYPE_NAK, code);
        pendingNakPsn = psn;
        qp.enterError(CompletionStatus.FLUSH_ERROR);
    }

    /**
     * The driving loop is about to wait for frames: an ACK still being coalesced goes out on the next duty cycle
     * instead of when its delay runs out. No more packets came to share it with, and waiting for the delay (a few
     * tens of microseconds, less than {@code poll(2)} can block for) cost the loop a yield per wake-up until then.
     *
     * @return whether an ACK was pending (the next duty cycle sends it).
     */
    boolean expediteAck()
    {
        if (ackPending && !ackNow)
        {
            ackNow = true;
            return true;
        }
        return false;
    }

    /**
     * @return the earliest time a coalesced ACK is due, or {@link Long#MAX_VALUE}.
     */
    long nextDeadlineNs()
    {
        return ackPending ? ackPendingSinceNs + config.ackCoalesceDelayNs() : Long.MAX_VALUE;
    }

    /**
     * Send what is due: a CNP, a NAK, or the coalesced ACK (only when connected).
     *
     * @return responses sent.
     */
    int sendResponses(final long nowNs, final boolean connected)
    {
        int work = 0;
        if (cnpPending)
        {
            final int length = writer.write(endpoint.txBuffer(), 0, Opcode.CNP, 0, false, CNP_PAYLOAD, 0,
                Opcode.CNP_RESERVED_LENGTH);
            if (endpoint.transmit(counters, length) != RcEndpoint.TX_RING_FULL)
            {
                cnpPending = false;
                counters.cnpsSent++;
                work++;
            }
        }
        if (pendingNakSyndrome != NO_NAK)
        {
            writer.aeth(pendingNakSyndrome, msn);
            final int length = writer.write(endpoint.txBuffer(), 0, Opcode.ACKNOWLEDGE, pendingNakPsn, false,
                endpoint.txBuffer(), 0, 0);
            if (endpoint.transmit(counters, length) != RcEndpoint.TX_RING_FULL)
            {
                if (AethHeader.type(pendingNakSyndrome) == AethHeader.TYPE_NAK)
                {
                    counters.naksSent++;
                }
                pendingNakSyndrome = NO_NAK;
                ackSent();
                work++;
            }
        }
        else if (connected && ((ackNow ? 1 : 0) | (ackPending ? coalescedAckDue(nowNs) : 0)) != 0)
        {
            writer.aeth(AethHeader.syndrome(AethHeader.TYPE_ACK, AethHeader.CREDITS_INVALID), msn);
            final int length = writer.write(endpoint.txBuffer(), 0, Opcode.ACKNOWLEDGE, psnAdd(expectedPsn, -1),
                false, endpoint.txBuffer(), 0, 0);
            if (endpoint.transmit(counters, length) != RcEndpoint.TX_RING_FULL)
            {
                counters.acksSent++;
                ackSent();
                work++;
            }
        }
        return work;
    }

    /**
     * Whether the pending ACK has waited its coalescing delay, as 1 or 0 without a branch: no warm-up makes it due
     * (every warm-up message's last packet asks for its ACK at once), and C2 compiled the branch the warm-up never
     * took as a trap, which every endpoint then met in its first real call, recompiling its queue pairs' duty cycle
     * (docs/performance.md). So the caller tests it together with {@code ackNow}, in one test the warm-up takes both
     * ways.
     */
    private int coalescedAckDue(final long nowNs)
    {
        return (int)((config.ackCoalesceDelayNs() - 1 - (nowNs - ackPendingSinceNs)) >>> 63);
    }

    private void ackSent()
    {
        ackPending = false;
        ackNow = false;
        packetsSinceAck = 0;
    }

    /**
     * In the error state: complete every posted receive with {@link CompletionStatus#FLUSH_ERROR}.
     *
     * @return completions delivered.
     */
    int flushReceives()
    {
        int flushed = 0;
        while (rqConsumed != rqPosted)
        {
            final int index = (int)(rqConsumed & rqMask);
            if (!recvCq.offer(rqWrId[index], CompletionStatus.FLUSH_ERROR, Completion.OP_RECV, 0, false, 0, qp.qpn()))
            {
                counters.completionQueueFull++;
                break;
            }
            rqRegion[index] = null;
            rqConsumed++;
            flushed++;
        }
        return flushed;
    }

    void onError()
    {
        inMessage = NONE;
    }
}
