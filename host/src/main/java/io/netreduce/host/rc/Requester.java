package io.netreduce.host.rc;

import io.netreduce.protocol.wire.AethHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.writer.RoceFrameWriter;
import org.agrona.BitUtil;
import org.agrona.DirectBuffer;

import static io.netreduce.protocol.wire.BthHeader.psnAdd;
import static io.netreduce.protocol.wire.BthHeader.psnDelta;

/**
 * The requester half of a {@link QueuePair}: the send queue, PSN assignment, packetisation, ACK/NAK handling,
 * go-back-N retransmission with its timer, and rate limiting.
 * <p>
 * Work requests get their PSNs when posted; each is cut into packets of at most {@link RcConfig#pmtu()} bytes.
 * Packets are rebuilt from the work request's source memory whenever they are (re)sent, so nothing but the send
 * queue is kept for retransmission. At most {@link RcConfig#maxOutstandingPackets()} PSNs are unacknowledged.
 * AckReq is set on the last packet of each message, every {@link RcConfig#ackRequestInterval()} packets and on
 * the packet that fills the window. A NAK (PSN sequence error) goes back to the NAKed PSN at once; a
 * retransmission timeout goes back to the oldest unacknowledged PSN; timeouts back off exponentially and after
 * {@link RcConfig#retryCount()} of them in a row the queue pair fails with {@link CompletionStatus#RETRY_EXCEEDED}.
 * A NAK for remote access, invalid request or remote operational error fails the work request it names and moves
 * the queue pair to the error state; later work requests flush.
 * <p>
 * Single-threaded: driven by the endpoint's duty cycle through its queue pair.
 */
final class Requester
{
    private final QueuePair qp;
    private final RcEndpoint endpoint;
    private final RcConfig config;
    private final int pmtu;
    private final CompletionQueue sendCq;
    private final RoceFrameWriter writer;
    private final QpCounters counters;
    private final RateLimiter rateLimiter;

    private final int sqMask;
    private final long[] sqWrId;
    private final int[] sqOpcode;
    private final MemoryRegion[] sqRegion;
    private final int[] sqOffset;
    private final int[] sqLength;
    private final long[] sqRemoteVa;
    private final int[] sqRkey;
    private final int[] sqImmediate;
    private final int[] sqFirstPsn;
    private final int[] sqPackets;
    private long sqPosted;
    private long sqCompleted;

    private long sendWr;
    private int sendPacket;

    private int startPsn;
    private int postPsn;
    private int sendPsn;
    private int unackedPsn;
    private int nextNewPsn;
    private int packetsSinceAckRequest;

    private boolean timerArmed;
    private long retransmitDeadlineNs;
    private long currentTimeoutNs;
    private int retries;
    private int rnrRetries;
    private boolean rnrHold;
    private long rnrHoldUntilNs;

    Requester(final QueuePair qp, final RcEndpoint endpoint, final RcConfig config, final CompletionQueue sendCq,
        final RoceFrameWriter writer, final QpCounters counters)
    {
        this.qp = qp;
        this.endpoint = endpoint;
        this.config = config;
        this.pmtu = config.pmtu();
        this.sendCq = sendCq;
        this.writer = writer;
        this.counters = counters;
        this.rateLimiter = new RateLimiter(config);
        final int sqSize = BitUtil.findNextPositivePowerOfTwo(config.sendQueueDepth());
        sqMask = sqSize - 1;
        sqWrId = new long[sqSize];
        sqOpcode = new int[sqSize];
        sqRegion = new MemoryRegion[sqSize];
        sqOffset = new int[sqSize];
        sqLength = new int[sqSize];
        sqRemoteVa = new long[sqSize];
        sqRkey = new int[sqSize];
        sqImmediate = new int[sqSize];
        sqFirstPsn = new int[sqSize];
        sqPackets = new int[sqSize];
        currentTimeoutNs = config.retransmitTimeoutNs();
    }

    void startPsn(final int psn)
    {
        startPsn = psn;
        postPsn = psn;
        sendPsn = psn;
        unackedPsn = psn;
        nextNewPsn = psn;
    }

    int startPsn()
    {
        return startPsn;
    }

    int unackedPsn()
    {
        return unackedPsn;
    }

    int sendPsn()
    {
        return sendPsn;
    }

    RateLimiter rateLimiter()
    {
        return rateLimiter;
    }

    int outstandingSends()
    {
        return (int)(sqPosted - sqCompleted);
    }

    /**
     * @return {@link QueuePair#POST_OK} or why the work request was refused (state checked by the caller).
     */
    int postSend(final WorkRequest wr)
    {
        if (sqPosted - sqCompleted > sqMask)
        {
            return QueuePair.POST_QUEUE_FULL;
        }
        final MemoryRegion region = wr.localRegion();
        final int opcode = wr.opcode();
        if (region == null || wr.localOffset() < 0 || wr.length() < 0 ||
            (long)wr.localOffset() + wr.length() > region.length() ||
            opcode < WorkRequest.RDMA_WRITE || opcode > WorkRequest.SEND_WITH_IMM)
        {
            return QueuePair.POST_INVALID;
        }
        final int packets = wr.length() == 0 ? 1 : (int)(((long)wr.length() + pmtu - 1) / pmtu);
        if (packets > QueuePair.MAX_MESSAGE_PACKETS)
        {
            return QueuePair.POST_INVALID;
        }
        final int index = (int)(sqPosted & sqMask);
        sqWrId[index] = wr.wrId();
        sqOpcode[index] = opcode;
        sqRegion[index] = region;
        sqOffset[index] = wr.localOffset();
        sqLength[index] = wr.length();
        sqRemoteVa[index] = wr.remoteAddress();
        sqRkey[index] = wr.rkey();
        sqImmediate[index] = wr.immediate();
        sqFirstPsn[index] = postPsn;
        sqPackets[index] = packets;
        postPsn = psnAdd(postPsn, packets);
        sqPosted++;
        return QueuePair.POST_OK;
    }

    /**
     * The timers: the rate limiter's refill and the retransmission deadline (connected queue pairs only).
     */
    void onTimers(final long nowNs)
    {
        rateLimiter.onTimer(nowNs);
        checkRetransmitTimer(nowNs);
    }

    void onCongestionNotification(final long nowNs)
    {
        counters.cnpsReceived++;
        rateLimiter.onCongestionNotification(nowNs);
    }

    /**
     * @return the earliest time this requester needs the duty cycle: {@code nowNs} when it has packets it may
     *         send now (or as soon as the rate limiter refills), else its retransmission or RNR deadline, or
     *         {@link Long#MAX_VALUE} when nothing is armed.
     */
    long nextDeadlineNs(final long nowNs)
    {
        if (sendWr != sqPosted && !rnrHold && psnDelta(sendPsn, unackedPsn) < config.maxOutstandingPackets())
        {
            return nowNs;
        }
        final long retransmit = timerArmed ? retransmitDeadlineNs : Long.MAX_VALUE;
        return rnrHold ? QueuePair.earlier(retransmit, rnrHoldUntilNs) : retransmit;
    }

    /**
     * Send new and retransmitted packets, as far as the window, the burst, the rate limiter and the transmit ring
     * allow.
     *
     * @return packets sent.
     */
    int transmit(final long nowNs)
    {
        if (rnrHold)
        {
            if (nowNs - rnrHoldUntilNs < 0)
            {
                return 0;
            }
            rnrHold = false;
        }
        final int budget = config.transmitBurst();
        final int window = config.maxOutstandingPackets();
        int sent = 0;
        while (sent < budget && sendWr != sqPosted)
        {
            final int inFlight = psnDelta(sendPsn, unackedPsn);
            if (inFlight >= window)
            {
                break;
            }
            final int index = (int)(sendWr & sqMask);
            final int packets = sqPackets[index];
            final int packet = sendPacket;
            final boolean first = packet == 0;
            final boolean last = packet == packets - 1;
            final int wrOpcode = sqOpcode[index];
            final int opcode = packetOpcode(wrOpcode, first, last);
            final int messageOffset = packet * pmtu;
            final int payloadLength = Math.min(pmtu, sqLength[index] - messageOffset);
            if (!rateLimiter.tryAcquire(nowNs, writer.frameLength(opcode, payloadLength)))
            {
                break;
            }
            final boolean ackRequest = last || packetsSinceAckRequest + 1 >= config.ackRequestInterval() ||
                inFlight + 1 >= window;
            if (first && WorkRequest.isWrite(wrOpcode))
            {
                writer.reth(sqRemoteVa[index], sqRkey[index], sqLength[index]);
            }
            if (last && WorkRequest.hasImmediate(wrOpcode))
            {
                writer.immediate(sqImmediate[index]);
            }
            final int psn = sendPsn;
            final int frameLength = writer.frameLength(opcode, payloadLength);
            final int claimed = endpoint.claim(counters, frameLength, writer.dstMac());
            if (claimed == RcEndpoint.CLAIM_RING_FULL)
            {
                break;
            }
            final boolean dropped = claimed == RcEndpoint.CLAIM_DROPPED;
            final int length = writer.write(dropped ? endpoint.txBuffer() : endpoint.claimBuffer(),
                dropped ? 0 : claimed, opcode, psn, ackRequest,
                sqRegion[index].buffer(), sqOffset[index] + messageOffset, payloadLength);
            if (length != frameLength)
            {
                throw new IllegalStateException("request frame of " + length + " bytes where " + frameLength +
                    " were claimed (opcode " + opcode + ")");
            }
            if (!dropped)
            {
                endpoint.commitClaim(counters);
            }
            sent++;
            packetsSinceAckRequest = ackRequest ? 0 : packetsSinceAckRequest + 1;
            counters.bytesSent += payloadLength;
            if (psnDelta(psn, nextNewPsn) < 0)
            {
                counters.retransmittedPackets++;
            }
            else
            {
                nextNewPsn = psnAdd(psn, 1);
            }
            sendPsn = psnAdd(psn, 1);
            if (last)
            {
                sendWr++;
                sendPacket = 0;
            }
            else
            {
                sendPacket = packet + 1;
            }
            if (!timerArmed)
            {
                arm(nowNs + currentTimeoutNs);
            }
        }
        return sent;
    }

    static int packetOpcode(final int wrOpcode, final boolean first, final boolean last)
    {
        final boolean imm = WorkRequest.hasImmediate(wrOpcode);
        if (WorkRequest.isWrite(wrOpcode))
        {
            if (first && last)
            {
                return imm ? Opcode.RDMA_WRITE_ONLY_WITH_IMMEDIATE : Opcode.RDMA_WRITE_ONLY;
            }
            if (first)
            {
                return Opcode.RDMA_WRITE_FIRST;
            }
            if (last)
            {
                return imm ? Opcode.RDMA_WRITE_LAST_WITH_IMMEDIATE : Opcode.RDMA_WRITE_LAST;
            }
            return Opcode.RDMA_WRITE_MIDDLE;
        }
        if (first && last)
        {
            return imm ? Opcode.SEND_ONLY_WITH_IMMEDIATE : Opcode.SEND_ONLY;
        }
        if (first)
        {
            return Opcode.SEND_FIRST;
        }
        if (last)
        {
            return imm ? Opcode.SEND_LAST_WITH_IMMEDIATE : Opcode.SEND_LAST;
        }
        return Opcode.SEND_MIDDLE;
    }

    private void arm(final long deadlineNs)
    {
        timerArmed = true;
        retransmitDeadlineNs = deadlineNs;
    }

    private boolean hasOutstanding()
    {
        return psnDelta(nextNewPsn, unackedPsn) > 0;
    }

    private void checkRetransmitTimer(final long nowNs)
    {
        if (!timerArmed || nowNs - retransmitDeadlineNs < 0)
        {
            return;
        }
        if (!hasOutstanding())
        {
            timerArmed = false;
            return;
        }
        counters.timeouts++;
        endpoint.trace().record(nowNs, TraceRecorder.TIMEOUT, qp.qpn(), unackedPsn);
        retries++;
        if (retries > config.retryCount())
        {
            timerArmed = false;
            qp.enterError(CompletionStatus.RETRY_EXCEEDED);
            return;
        }
        currentTimeoutNs = Math.min(currentTimeoutNs * 2, config.maxRetransmitTimeoutNs());
        goBack(unackedPsn);
        arm(nowNs + currentTimeoutNs);
    }

    /**
     * Position the transmitter at {@code psn}: the work request containing it, and the packet within.
     */
    private void goBack(final int psn)
    {
        for (long w = sqCompleted; w < sqPosted; w++)
        {
            final int index = (int)(w & sqMask);
            final int delta = psnDelta(psn, sqFirstPsn[index]);
            if (delta >= 0 && delta < sqPackets[index])
            {
                sendWr = w;
                sendPacket = delta;
                sendPsn = psn;
                packetsSinceAckRequest = 0;
                return;
            }
        }
        sendWr = sqPosted;
        sendPacket = 0;
        sendPsn = psn;
    }

    /**
     * An ACK, NAK or RNR NAK from the peer's responder.
     */
    void onAcknowledge(final RoceFrame frame, final long nowNs)
    {
        final DirectBuffer buffer = frame.buffer();
        final int syndrome = AethHeader.syndrome(buffer, frame.extensionOffset());
        final int psn = frame.psn();
        switch (AethHeader.type(syndrome))
        {
            case AethHeader.TYPE_ACK ->
            {
                counters.acksReceived++;
                acknowledgeThrough(psn, nowNs);
            }
            case AethHeader.TYPE_NAK -> onNak(syndrome, psn, nowNs);
            case AethHeader.TYPE_RNR_NAK -> onRnrNak(psn, nowNs);
            default ->
            {
                // reserved AETH type: ignore
            }
        }
    }

    private void onNak(final int syndrome, final int psn, final long nowNs)
    {
        counters.naksReceived++;
        if (!isUnacked(psn))
        {
            return; // a NAK for a PSN already acknowledged or never sent: stale
        }
        acknowledgeThrough(psnAdd(psn, -1), nowNs);
        final int code = AethHeader.code(syndrome);
        if (code == AethHeader.NAK_PSN_SEQUENCE_ERROR)
        {
            // The responder saw a gap: resend from the PSN it expects now, not at the timeout.
            endpoint.trace().record(nowNs, TraceRecorder.NAK, qp.qpn(), psn);
            goBack(psn);
            arm(nowNs + currentTimeoutNs);
        }
        else
        {
            qp.enterError(code == AethHeader.NAK_REMOTE_ACCESS_ERROR ? CompletionStatus.REMOTE_ACCESS_ERROR :
                code == AethHeader.NAK_INVALID_REQUEST ? CompletionStatus.REMOTE_INVALID_REQUEST :
                CompletionStatus.REMOTE_OPERATION_ERROR);
        }
    }

    private void onRnrNak(final int psn, final long nowNs)
    {
        counters.rnrNaksReceived++;
        if (!isUnacked(psn))
        {
            return;
        }
        acknowledgeThrough(psnAdd(psn, -1), nowNs);
        rnrRetries++;
        endpoint.trace().record(nowNs, TraceRecorder.RNR_NAK, qp.qpn(), psn);
        if (config.rnrRetryCount() != 7 && rnrRetries > config.rnrRetryCount())
        {
            qp.enterError(CompletionStatus.RNR_RETRY_EXCEEDED);
            return;
        }
        goBack(psn);
        rnrHold = true;
        rnrHoldUntilNs = nowNs + config.rnrTimeoutNs();
        arm(rnrHoldUntilNs + currentTimeoutNs);
    }

    private boolean isUnacked(final int psn)
    {
        return psnDelta(psn, unackedPsn) >= 0 && psnDelta(psn, nextNewPsn) < 0;
    }

    /**
     * Everything up to and including {@code psn} was received by the peer.
     */
    private void acknowledgeThrough(final int psn, final long nowNs)
    {
        if (psnDelta(psn, unackedPsn) < 0 || psnDelta(psn, nextNewPsn) >= 0)
        {
            return; // stale (already acked) or acks a PSN never sent
        }
        unackedPsn = psnAdd(psn, 1);
        retries = 0;
        rnrRetries = 0;
        currentTimeoutNs = config.retransmitTimeoutNs();
        if (psnDelta(unackedPsn, sendPsn) > 0)
        {
            // A late ACK for packets sent before a go-back: no need to send them again.
            goBack(unackedPsn);
        }
        if (hasOutstanding())
        {
            arm(nowNs + currentTimeoutNs);
        }
        else
        {
            timerArmed = false;
        }
    }

    /**
     * Complete acknowledged work requests in order; in the error state, flush the rest with the error status
     * (the first one with the status that caused the error).
     *
     * @return completions delivered.
     */
    int retireCompleted(final boolean inError)
    {
        int retired = 0;
        while (sqCompleted != sqPosted)
        {
            final int index = (int)(sqCompleted & sqMask);
            final int lastPsn = psnAdd(sqFirstPsn[index], sqPackets[index] - 1);
            final boolean acked = psnDelta(lastPsn, unackedPsn) < 0 && sqCompleted < sendWr;
            final int status;
            if (acked)
            {
                status = CompletionStatus.SUCCESS;
            }
            else if (inError)
            {
                status = qp.errorStatus();
            }
            else
            {
                break;
            }
            if (!sendCq.offer(sqWrId[index], status,
                WorkRequest.isWrite(sqOpcode[index]) ? Completion.OP_RDMA_WRITE : Completion.OP_SEND,
                sqLength[index], false, 0, qp.qpn()))
            {
                counters.completionQueueFull++;
                break;
            }
            if (!acked)
            {
                qp.errorStatusDelivered();
            }
            sqRegion[index] = null;
            sqCompleted++;
            retired++;
        }
        if (inError && sendWr < sqCompleted)
        {
            sendWr = sqCompleted;
        }
        return retired;
    }

    void onError()
    {
        timerArmed = false;
    }
}
