package io.netreduce.host.rc;

import io.netreduce.protocol.wire.AethHeader;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.ImmDtHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RethHeader;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.writer.RoceFrameWriter;
import org.agrona.BitUtil;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;

import static io.netreduce.protocol.wire.BthHeader.psnAdd;
import static io.netreduce.protocol.wire.BthHeader.psnDelta;

/**
 * A software RoCEv2 reliable-connected queue pair: the requester and responder halves of one RC connection,
 * driven by its {@link RcEndpoint}'s duty cycle.
 * <h2>Application API (verbs-like)</h2>
 * <ul>
 *   <li>{@link #postSend(WorkRequest)}: RDMA WRITE / SEND, with or without immediate data;</li>
 *   <li>{@link #postRecv(long, MemoryRegion, int, int)}: a buffer for an incoming SEND, or a slot an incoming
 *       RDMA WRITE WITH IMMEDIATE consumes (real RC semantics);</li>
 *   <li>completions arrive on the send and receive {@link CompletionQueue}s given at creation.</li>
 * </ul>
 * All of it on the endpoint's thread: a queue pair is not thread-safe.
 * <h2>Requester</h2>
 * Work requests get their PSNs when posted; each is cut into packets of at most {@link RcConfig#pmtu()} bytes.
 * Packets are rebuilt from the work request's source memory whenever they are (re)sent, so nothing but the send
 * queue is kept for retransmission. At most {@link RcConfig#maxOutstandingPackets()} PSNs are unacknowledged.
 * AckReq is set on the last packet of each message, every {@link RcConfig#ackRequestInterval()} packets and on
 * the packet that fills the window. A NAK (PSN sequence error) or a retransmission timeout goes back to the NAKed
 * or oldest unacknowledged PSN (go-back-N); timeouts back off exponentially and after
 * {@link RcConfig#retryCount()} of them in a row the queue pair fails with {@link CompletionStatus#RETRY_EXCEEDED}.
 * A NAK for remote access, invalid request or remote operational error fails the work request it names and moves
 * the queue pair to the error state; later work requests flush.
 * <h2>Responder</h2>
 * Requests are accepted only at the expected PSN. Earlier PSNs are duplicates: re-ACKed, never re-applied.
 * Later PSNs are a gap: the first one is NAKed (PSN sequence error) and no further NAK is sent until the expected
 * PSN arrives. RDMA WRITEs are checked against the {@link MemoryRegistry} (R_Key, VA and length) and placed in
 * order; SENDs fill the next posted receive. ACKs are coalesced: one per duty cycle when a packet asked for one
 * (AckReq), otherwise after {@link RcConfig#ackCoalescePackets()} packets or {@link RcConfig#ackCoalesceDelayNs()}.
 * A CE-marked request makes the responder send a CNP, at most one per {@link RcConfig#cnpIntervalNs()}.
 */
public final class QueuePair
{
    public static final int STATE_RESET = 0;
    public static final int STATE_RTS = 1;
    public static final int STATE_ERROR = 2;

    public static final int POST_OK = 0;
    public static final int POST_QUEUE_FULL = 1;
    public static final int POST_INVALID = 2;
    public static final int POST_WRONG_STATE = 3;

    /** Longest message in packets, so every PSN comparison stays well inside the 2^23 serial-number range. */
    static final int MAX_MESSAGE_PACKETS = 1 << 21;

    private static final int NONE = 0;
    private static final int IN_WRITE = 1;
    private static final int IN_SEND = 2;
    private static final int NO_NAK = -1;
    private static final DirectBuffer CNP_PAYLOAD = new UnsafeBuffer(new byte[Opcode.CNP_RESERVED_LENGTH]);

    private final RcEndpoint endpoint;
    private final int qpn;
    private final RcConfig config;
    private final int pmtu;
    private final CompletionQueue sendCq;
    private final CompletionQueue recvCq;
    private final RoceFrameWriter writer = new RoceFrameWriter();
    private final QpCounters counters = new QpCounters();
    private final RateLimiter rateLimiter;
    private int state = STATE_RESET;
    private int remoteQpn;

    // ---- send queue: parallel arrays indexed by (sequence & sqMask) ----
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
    /** Work request (sequence) and packet within it that transmit() sends next. */
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
    private int errorStatus = CompletionStatus.FLUSH_ERROR;

    // ---- receive queue ----
    private final int rqMask;
    private final long[] rqWrId;
    private final MemoryRegion[] rqRegion;
    private final int[] rqOffset;
    private final int[] rqLength;
    private long rqPosted;
    private long rqConsumed;

    // ---- responder ----
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
    private boolean cnpEverSent;
    private long lastCnpNs;
    private int inMessage = NONE;
    private MemoryRegion writeRegion;
    private long writeOffset;
    private long writeRemaining;
    private int messageBytes;

    QueuePair(
        final RcEndpoint endpoint,
        final int qpn,
        final int startPsn,
        final RcConfig config,
        final CompletionQueue sendCq,
        final CompletionQueue recvCq)
    {
        this.endpoint = endpoint;
        this.qpn = qpn;
        this.config = config;
        this.pmtu = config.pmtu();
        this.sendCq = sendCq;
        this.recvCq = recvCq;
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
        final int rqSize = BitUtil.findNextPositivePowerOfTwo(config.receiveQueueDepth());
        rqMask = rqSize - 1;
        rqWrId = new long[rqSize];
        rqRegion = new MemoryRegion[rqSize];
        rqOffset = new int[rqSize];
        rqLength = new int[rqSize];
        startPsn(startPsn);
        currentTimeoutNs = config.retransmitTimeoutNs();
        writer.trafficClass(config.trafficClass(), 0);
        writer.udpSrcPort(0xC000 | (qpn & 0x3FFF));
    }

    /**
     * Choose the first PSN this queue pair sends; only before {@link #connect}.
     */
    public QueuePair startPsn(final int psn)
    {
        if (state != STATE_RESET)
        {
            throw new IllegalStateException("start PSN can only be set before connect");
        }
        startPsn = psn & BthHeader.PSN_MASK;
        postPsn = startPsn;
        sendPsn = startPsn;
        unackedPsn = startPsn;
        nextNewPsn = startPsn;
        return this;
    }

    /**
     * Move to ready-to-send with the peer's parameters (the INIT/RTR/RTS transitions of ibverbs in one step).
     *
     * @param remoteQpn      the peer's queue pair number.
     * @param remoteStartPsn the first PSN the peer will send: our responder's expected PSN.
     * @param remoteMac      the peer's (or next hop's) MAC.
     * @param remoteIp       the peer's address, same family as the endpoint's.
     */
    public void connect(final int remoteQpn, final int remoteStartPsn, final long remoteMac, final InetAddress remoteIp)
    {
        if (state != STATE_RESET)
        {
            throw new IllegalStateException("queue pair " + qpn + " is already connected");
        }
        final InetAddress localIp = endpoint.localIp();
        if (localIp instanceof Inet4Address && remoteIp instanceof Inet4Address)
        {
            writer.ipv4(toInt(localIp.getAddress()), toInt(remoteIp.getAddress()));
        }
        else if (localIp instanceof Inet6Address && remoteIp instanceof Inet6Address)
        {
            writer.ipv6(localIp.getAddress(), remoteIp.getAddress());
        }
        else
        {
            throw new IllegalArgumentException("address families differ: " + localIp + " and " + remoteIp);
        }
        writer.macs(endpoint.localMac(), remoteMac);
        writer.destQp(remoteQpn);
        this.remoteQpn = remoteQpn & BthHeader.QP_MASK;
        expectedPsn = remoteStartPsn & BthHeader.PSN_MASK;
        state = STATE_RTS;
    }

    public void connect(final ConnectionInfo remote)
    {
        connect(remote.qpn(), remote.psn(), remote.mac(), remote.ip());
    }

    /**
     * @return this side's connection parameters, advertising {@code region} (may be null: va/rkey/len 0).
     */
    public ConnectionInfo localInfo(final MemoryRegion region)
    {
        return new ConnectionInfo(qpn, startPsn, endpoint.localIp(), endpoint.localMac(),
            region != null ? region.virtualAddress() : 0, region != null ? region.rkey() : 0,
            region != null ? region.length() : 0);
    }

    /**
     * Queue a send work request.
     *
     * @return {@link #POST_OK}, or why it was refused: {@link #POST_QUEUE_FULL}, {@link #POST_INVALID}
     * (bad opcode, local range or message too long) or {@link #POST_WRONG_STATE} (not connected, or in error).
     */
    public int postSend(final WorkRequest wr)
    {
        if (state != STATE_RTS)
        {
            return POST_WRONG_STATE;
        }
        if (sqPosted - sqCompleted > sqMask)
        {
            return POST_QUEUE_FULL;
        }
        final MemoryRegion region = wr.localRegion();
        final int opcode = wr.opcode();
        if (region == null || wr.localOffset() < 0 || wr.length() < 0 ||
            (long)wr.localOffset() + wr.length() > region.length() ||
            opcode < WorkRequest.RDMA_WRITE || opcode > WorkRequest.SEND_WITH_IMM)
        {
            return POST_INVALID;
        }
        final int packets = wr.length() == 0 ? 1 : (int)(((long)wr.length() + pmtu - 1) / pmtu);
        if (packets > MAX_MESSAGE_PACKETS)
        {
            return POST_INVALID;
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
        return POST_OK;
    }

    /**
     * Post a receive buffer: {@code length} bytes of {@code region} at {@code offset}. Receives are consumed in
     * order by incoming SENDs and RDMA WRITEs WITH IMMEDIATE.
     *
     * @return {@link #POST_OK}, {@link #POST_QUEUE_FULL}, {@link #POST_INVALID} or {@link #POST_WRONG_STATE}.
     */
    public int postRecv(final long wrId, final MemoryRegion region, final int offset, final int length)
    {
        if (state == STATE_ERROR)
        {
            return POST_WRONG_STATE;
        }
        if (rqPosted - rqConsumed > rqMask)
        {
            return POST_QUEUE_FULL;
        }
        if (region == null || offset < 0 || length < 0 || (long)offset + length > region.length())
        {
            return POST_INVALID;
        }
        final int index = (int)(rqPosted & rqMask);
        rqWrId[index] = wrId;
        rqRegion[index] = region;
        rqOffset[index] = offset;
        rqLength[index] = length;
        rqPosted++;
        return POST_OK;
    }

    public int qpn()
    {
        return qpn;
    }

    public int remoteQpn()
    {
        return remoteQpn;
    }

    public int state()
    {
        return state;
    }

    public QpCounters counters()
    {
        return counters;
    }

    public RateLimiter rateLimiter()
    {
        return rateLimiter;
    }

    /**
     * @return send work requests posted and not yet completed.
     */
    public int outstandingSends()
    {
        return (int)(sqPosted - sqCompleted);
    }

    /**
     * @return receives posted and not yet consumed.
     */
    public int postedReceives()
    {
        return (int)(rqPosted - rqConsumed);
    }

    /**
     * @return the responder's expected PSN.
     */
    public int expectedPsn()
    {
        return expectedPsn;
    }

    /**
     * @return the requester's oldest unacknowledged PSN.
     */
    public int unackedPsn()
    {
        return unackedPsn;
    }

    // ================================================================ duty cycle

    int doWork(final long nowNs)
    {
        int work = 0;
        if (state == STATE_RTS)
        {
            rateLimiter.onTimer(nowNs);
            checkRetransmitTimer(nowNs);
        }
        work += retireCompleted();
        work += sendResponses(nowNs);
        if (state == STATE_RTS)
        {
            work += transmit(nowNs);
        }
        return work;
    }

    void onFrame(final RoceFrame frame, final long nowNs)
    {
        counters.packetsReceived++;
        if (state != STATE_RTS)
        {
            return;
        }
        final int opcode = frame.opcode();
        if (opcode == Opcode.CNP)
        {
            counters.cnpsReceived++;
            rateLimiter.onCongestionNotification(nowNs);
        }
        else if (opcode == Opcode.ACKNOWLEDGE)
        {
            onAcknowledge(frame, nowNs);
        }
        else if (opcode <= Opcode.RDMA_WRITE_ONLY_WITH_IMMEDIATE)
        {
            onRequest(frame, nowNs);
        }
        else if (opcode == Opcode.RDMA_READ_REQUEST || opcode == Opcode.COMPARE_SWAP || opcode == Opcode.FETCH_ADD ||
            opcode == Opcode.SEND_LAST_WITH_INVALIDATE || opcode == Opcode.SEND_ONLY_WITH_INVALIDATE)
        {
            // Requests this endpoint does not implement: answer as a NIC without the capability would.
            if (psnDelta(frame.psn(), expectedPsn) == 0)
            {
                queueFatalNak(AethHeader.NAK_INVALID_REQUEST, frame.psn());
            }
        }
        // Other opcodes (UC/UD, read responses) have no meaning on this RC queue pair: ignored.
    }

    // ================================================================ requester

    private int transmit(final long nowNs)
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
            final int length = writer.write(endpoint.txBuffer(), 0, opcode, psn, ackRequest,
                sqRegion[index].buffer(), sqOffset[index] + messageOffset, payloadLength);
            if (endpoint.transmit(counters, length) == RcEndpoint.TX_RING_FULL)
            {
                break;
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

    private static int packetOpcode(final int wrOpcode, final boolean first, final boolean last)
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
        retries++;
        if (retries > config.retryCount())
        {
            timerArmed = false;
            enterError(CompletionStatus.RETRY_EXCEEDED);
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

    private void onAcknowledge(final RoceFrame frame, final long nowNs)
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
            case AethHeader.TYPE_NAK ->
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
                    goBack(psn);
                    arm(nowNs + currentTimeoutNs);
                }
                else
                {
                    enterError(code == AethHeader.NAK_REMOTE_ACCESS_ERROR ? CompletionStatus.REMOTE_ACCESS_ERROR :
                        code == AethHeader.NAK_INVALID_REQUEST ? CompletionStatus.REMOTE_INVALID_REQUEST :
                        CompletionStatus.REMOTE_OPERATION_ERROR);
                }
            }
            case AethHeader.TYPE_RNR_NAK ->
            {
                counters.rnrNaksReceived++;
                if (!isUnacked(psn))
                {
                    return;
                }
                acknowledgeThrough(psnAdd(psn, -1), nowNs);
                rnrRetries++;
                if (config.rnrRetryCount() != 7 && rnrRetries > config.rnrRetryCount())
                {
                    enterError(CompletionStatus.RNR_RETRY_EXCEEDED);
                    return;
                }
                goBack(psn);
                rnrHold = true;
                rnrHoldUntilNs = nowNs + config.rnrTimeoutNs();
                arm(rnrHoldUntilNs + currentTimeoutNs);
            }
            default ->
            {
                // reserved AETH type: ignore
            }
        }
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

    private int retireCompleted()
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
            else if (state == STATE_ERROR)
            {
                status = errorStatus;
            }
            else
            {
                break;
            }
            if (!sendCq.offer(sqWrId[index], status,
                WorkRequest.isWrite(sqOpcode[index]) ? Completion.OP_RDMA_WRITE : Completion.OP_SEND,
                sqLength[index], false, 0, qpn))
            {
                counters.completionQueueFull++;
                break;
            }
            if (!acked)
            {
                errorStatus = CompletionStatus.FLUSH_ERROR;
            }
            sqRegion[index] = null;
            sqCompleted++;
            retired++;
        }
        if (state == STATE_ERROR)
        {
            if (sendWr < sqCompleted)
            {
                sendWr = sqCompleted;
            }
            while (rqConsumed != rqPosted)
            {
                final int index = (int)(rqConsumed & rqMask);
                if (!recvCq.offer(rqWrId[index], CompletionStatus.FLUSH_ERROR, Completion.OP_RECV, 0, false, 0, qpn))
                {
                    counters.completionQueueFull++;
                    break;
                }
                rqRegion[index] = null;
                rqConsumed++;
                retired++;
            }
        }
        return retired;
    }

    private void enterError(final int firstStatus)
    {
        if (state == STATE_ERROR)
        {
            return;
        }
        state = STATE_ERROR;
        errorStatus = firstStatus;
        timerArmed = false;
        inMessage = NONE;
    }

    // ================================================================ responder

    private void onRequest(final RoceFrame frame, final long nowNs)
    {
        if (frame.ecn() == Ipv4Header.ECN_CE)
        {
            counters.ecnMarked++;
            if (!cnpEverSent || nowNs - lastCnpNs >= config.cnpIntervalNs())
            {
                cnpEverSent = true;
                lastCnpNs = nowNs;
                cnpPending = true;
            }
        }
        final int psn = frame.psn();
        final int delta = psnDelta(psn, expectedPsn);
        if (delta < 0)
        {
            counters.duplicates++;
            ackNow = true; // re-ACK so a requester that lost our ACK stops retransmitting; never re-apply
            return;
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
            return;
        }

        final int opcode = frame.opcode();
        final boolean first = frame.has(Opcode.IS_FIRST);
        final boolean last = frame.has(Opcode.IS_LAST);
        final boolean isWrite = opcode >= Opcode.RDMA_WRITE_FIRST;
        if (first != (inMessage == NONE) || (!first && (inMessage == IN_WRITE) != isWrite))
        {
            queueFatalNak(AethHeader.NAK_INVALID_REQUEST, psn);
            return;
        }
        final DirectBuffer buffer = frame.buffer();
        final int payloadLength = frame.payloadLength();
        final boolean needsReceive = !isWrite || frame.has(Opcode.HAS_IMMDT);
        if (last && needsReceive && !recvCq.hasSpace())
        {
            counters.completionQueueFull++;
            return; // not acknowledged: the requester will send it again
        }

        if (isWrite)
        {
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
                    return;
                }
                writeRegion = region;
                writeOffset = va - region.virtualAddress();
                writeRemaining = dmaLength;
                messageBytes = 0;
            }
            if (payloadLength > writeRemaining || (last && payloadLength != writeRemaining))
            {
                queueFatalNak(AethHeader.NAK_INVALID_REQUEST, psn);
                return;
            }
            if (last && needsReceive && rqConsumed == rqPosted)
            {
                queueRnrNak(psn);
                return;
            }
            writeRegion.buffer().putBytes((int)writeOffset, buffer, frame.payloadOffset(), payloadLength);
            writeOffset += payloadLength;
            writeRemaining -= payloadLength;
            inMessage = last ? NONE : IN_WRITE;
        }
        else
        {
            if (first)
            {
                if (rqConsumed == rqPosted)
                {
                    queueRnrNak(psn);
                    return;
                }
                messageBytes = 0;
            }
            final int index = (int)(rqConsumed & rqMask);
            if ((long)messageBytes + payloadLength > rqLength[index])
            {
                recvCq.offer(rqWrId[index], CompletionStatus.LOCAL_LENGTH_ERROR, Completion.OP_RECV, messageBytes,
                    false, 0, qpn);
                rqRegion[index] = null;
                rqConsumed++;
                queueFatalNak(AethHeader.NAK_INVALID_REQUEST, psn);
                return;
            }
            rqRegion[index].buffer().putBytes(rqOffset[index] + messageBytes, buffer, frame.payloadOffset(),
                payloadLength);
            inMessage = last ? NONE : IN_SEND;
        }
        messageBytes += payloadLength;
        counters.bytesReceived += payloadLength;

        if (last)
        {
            msn = (msn + 1) & 0xFF_FFFF;
            if (needsReceive)
            {
                final int index = (int)(rqConsumed & rqMask);
                final boolean hasImm = frame.has(Opcode.HAS_IMMDT);
                final int imm = hasImm ?
                    ImmDtHeader.immediate(buffer, frame.bthOffset() + Opcode.immDtOffset(opcode)) : 0;
                recvCq.offer(rqWrId[index], CompletionStatus.SUCCESS,
                    isWrite ? Completion.OP_RECV_RDMA_WITH_IMM : Completion.OP_RECV, messageBytes, hasImm, imm, qpn);
                rqRegion[index] = null;
                rqConsumed++;
            }
        }
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

    private void queueFatalNak(final int code, final int psn)
    {
        pendingNakSyndrome = AethHeader.syndrome(AethHeader.TYPE_NAK, code);
        pendingNakPsn = psn;
        enterError(CompletionStatus.FLUSH_ERROR);
    }

    private int sendResponses(final long nowNs)
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
                ackPending = false;
                ackNow = false;
                packetsSinceAck = 0;
                work++;
            }
        }
        else if (state == STATE_RTS &&
            (ackNow || (ackPending && nowNs - ackPendingSinceNs >= config.ackCoalesceDelayNs())))
        {
            writer.aeth(AethHeader.syndrome(AethHeader.TYPE_ACK, AethHeader.CREDITS_INVALID), msn);
            final int length = writer.write(endpoint.txBuffer(), 0, Opcode.ACKNOWLEDGE, psnAdd(expectedPsn, -1),
                false, endpoint.txBuffer(), 0, 0);
            if (endpoint.transmit(counters, length) != RcEndpoint.TX_RING_FULL)
            {
                counters.acksSent++;
                ackPending = false;
                ackNow = false;
                packetsSinceAck = 0;
                work++;
            }
        }
        return work;
    }

    private static int toInt(final byte[] address)
    {
        return ((address[0] & 0xFF) << 24) | ((address[1] & 0xFF) << 16) | ((address[2] & 0xFF) << 8) |
            (address[3] & 0xFF);
    }

    @Override
    public String toString()
    {
        return "QueuePair{qpn=" + qpn + ", remoteQpn=" + remoteQpn + ", state=" + state + ", sendPsn=" + sendPsn +
            ", unackedPsn=" + unackedPsn + ", expectedPsn=" + expectedPsn + '}';
    }
}
