package io.netreduce.host.rc;

import io.netreduce.protocol.wire.AethHeader;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.writer.RoceFrameWriter;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;

import static io.netreduce.protocol.wire.BthHeader.psnDelta;

/**
 * A software RoCEv2 reliable-connected queue pair: the facade over the {@link Requester} and {@link Responder}
 * halves of one RC connection, driven by its {@link RcEndpoint}'s duty cycle. It owns what both halves share: the
 * connection state (reset, ready to send, error), the peer's addresses in the frame writer's header template,
 * and the counters.
 * <h2>Application API (verbs-like)</h2>
 * <ul>
 *   <li>{@link #postSend(WorkRequest)}: RDMA WRITE / SEND, with or without immediate data;</li>
 *   <li>{@link #postRecv(long, MemoryRegion, int, int)}: a buffer for an incoming SEND, or a slot an incoming
 *       RDMA WRITE WITH IMMEDIATE consumes (real RC semantics);</li>
 *   <li>completions arrive on the send and receive {@link CompletionQueue}s given at creation.</li>
 * </ul>
 * All of it on the endpoint's thread: a queue pair is not thread-safe. The requester's and responder's rules are
 * in their own classes' documentation.
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

    private final RcEndpoint endpoint;
    private final int qpn;
    private final RoceFrameWriter writer = new RoceFrameWriter();
    private final QpCounters counters = new QpCounters();
    private final Requester requester;
    private final Responder responder;
    private int state = STATE_RESET;
    private int remoteQpn;
    private int errorStatus = CompletionStatus.FLUSH_ERROR;
    private int udpSourcePort;

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
        this.requester = new Requester(this, endpoint, config, sendCq, writer, counters);
        this.responder = new Responder(this, endpoint, config, recvCq, writer, counters);
        startPsn(startPsn);
        writer.trafficClass(config.trafficClass(), 0);
        udpSourcePort = 0xC000 | (qpn & 0x3FFF);
        writer.udpSrcPort(udpSourcePort);
    }

    /**
     * Set the IP traffic class (DSCP and ECN) of the packets this queue pair sends from now on, e.g. ECN CE for a
     * warm-up that stands for a congested hop ({@code RingWarmUp}); by default {@link RcConfig#trafficClass()}. The
     * ICRC masks the field, so a packet's ICRC does not change with it.
     *
     * @param trafficClass 0..255: the IPv4 TOS or IPv6 traffic class.
     * @return this queue pair.
     */
    public QueuePair trafficClass(final int trafficClass)
    {
        if (trafficClass < 0 || trafficClass > 0xFF)
        {
            throw new IllegalArgumentException("traffic class must be 0..255: " + trafficClass);
        }
        writer.trafficClass(trafficClass, 0);
        return this;
    }

    /**
     * Choose the UDP source port of every packet this queue pair sends (requests, ACKs, NAKs, CNPs); only before
     * {@link #connect}. By default it is {@code 0xC000 | (QPN & 0x3FFF)}, one port per queue pair. A fabric's ECMP
     * hashes it, so it picks the connection's path; a job with several aggregation trees gives each tree's queue
     * pairs the tree's port so that the switch steers the tree to its appliance ({@code MultiTreeAllReduce}).
     *
     * @param port 1..65535.
     */
    public QueuePair udpSourcePort(final int port)
    {
        if (state != STATE_RESET)
        {
            throw new IllegalStateException("the UDP source port can only be set before connect");
        }
        if (port <= 0 || port > 0xFFFF)
        {
            throw new IllegalArgumentException("UDP source port must be 1..65535: " + port);
        }
        writer.udpSrcPort(port);
        udpSourcePort = port;
        return this;
    }

    /**
     * @return the UDP source port of the packets this queue pair sends.
     */
    public int udpSourcePort()
    {
        return udpSourcePort;
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
        requester.startPsn(psn & BthHeader.PSN_MASK);
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
        responder.expectedPsn(remoteStartPsn & BthHeader.PSN_MASK);
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
        return new ConnectionInfo(qpn, requester.startPsn(), endpoint.localIp(), endpoint.localMac(),
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
        return state != STATE_RTS ? POST_WRONG_STATE : requester.postSend(wr);
    }

    /**
     * Post a receive buffer: {@code length} bytes of {@code region} at {@code offset}. Receives are consumed in
     * order by incoming SENDs and RDMA WRITEs WITH IMMEDIATE.
     *
     * @return {@link #POST_OK}, {@link #POST_QUEUE_FULL}, {@link #POST_INVALID} or {@link #POST_WRONG_STATE}.
     */
    public int postRecv(final long wrId, final MemoryRegion region, final int offset, final int length)
    {
        return state == STATE_ERROR ? POST_WRONG_STATE : responder.postRecv(wrId, region, offset, length);
    }

    /**
     * Whether a CE-marked request makes this queue pair's responder send a CNP to the peer (DCQCN; on by default).
     * A NetReduce ring turns it off on its receive queue pair when its workers adapt their window to the marks on
     * results themselves (PANAMA's implicit acknowledgements): the sender's rate limiter would otherwise react to
     * the same marks a second time.
     */
    public QueuePair congestionNotification(final boolean sendCnps)
    {
        responder.sendsCnps(sendCnps);
        return this;
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
        return requester.rateLimiter();
    }

    /**
     * @return send work requests posted and not yet completed.
     */
    public int outstandingSends()
    {
        return requester.outstandingSends();
    }

    /**
     * @return receives posted and not yet consumed.
     */
    public int postedReceives()
    {
        return responder.postedReceives();
    }

    /**
     * @return the responder's expected PSN.
     */
    public int expectedPsn()
    {
        return responder.expectedPsn();
    }

    /**
     * @return the requester's oldest unacknowledged PSN.
     */
    public int unackedPsn()
    {
        return requester.unackedPsn();
    }

    /**
     * @return the earliest time this queue pair's timers (retransmission, RNR hold, coalesced ACK) need the duty
     *         cycle, or {@link Long#MAX_VALUE} when none is armed: how long an idle endpoint may block.
     */
    long nextDeadlineNs(final long nowNs)
    {
        if (state == STATE_ERROR)
        {
            // Completions to flush: due now (retiring them is cheap and bounded).
            return outstandingSends() > 0 || postedReceives() > 0 ? nowNs : Long.MAX_VALUE;
        }
        if (state != STATE_RTS)
        {
            return Long.MAX_VALUE;
        }
        return earlier(requester.nextDeadlineNs(nowNs), responder.nextDeadlineNs());
    }

    /**
     * @return whether a coalesced ACK was pending and is now due on the next duty cycle ({@link Responder#expediteAck}).
     */
    boolean expediteAck()
    {
        return state == STATE_RTS && responder.expediteAck();
    }

    /**
     * @return the earlier of two {@link System#nanoTime()} deadlines, {@link Long#MAX_VALUE} meaning none.
     */
    static long earlier(final long a, final long b)
    {
        if (a == Long.MAX_VALUE)
        {
            return b;
        }
        if (b == Long.MAX_VALUE)
        {
            return a;
        }
        return a - b < 0 ? a : b;
    }

    // ================================================================ duty cycle

    int doWork(final long nowNs)
    {
        int work = 0;
        if (state == STATE_RTS)
        {
            requester.onTimers(nowNs);
        }
        final boolean inError = state == STATE_ERROR;
        work += requester.retireCompleted(inError);
        if (inError)
        {
            work += responder.flushReceives();
        }
        work += responder.sendResponses(nowNs, state == STATE_RTS);
        if (state == STATE_RTS)
        {
            work += requester.transmit(nowNs);
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
            requester.onCongestionNotification(nowNs);
        }
        else if (opcode == Opcode.ACKNOWLEDGE)
        {
            requester.onAcknowledge(frame, nowNs);
        }
        else if (opcode <= Opcode.RDMA_WRITE_ONLY_WITH_IMMEDIATE)
        {
            responder.onRequest(frame, nowNs);
        }
        else if (opcode == Opcode.RDMA_READ_REQUEST || opcode == Opcode.COMPARE_SWAP || opcode == Opcode.FETCH_ADD ||
            opcode == Opcode.SEND_LAST_WITH_INVALIDATE || opcode == Opcode.SEND_ONLY_WITH_INVALIDATE)
        {
            // Requests this endpoint does not implement: answer as a NIC without the capability would.
            if (psnDelta(frame.psn(), responder.expectedPsn()) == 0)
            {
                responder.queueFatalNak(AethHeader.NAK_INVALID_REQUEST, frame.psn());
            }
        }
        // Other opcodes (UC/UD, read responses) have no meaning on this RC queue pair: ignored.
    }

    // ================================================================ shared by the two halves

    /**
     * Move to the error state: outstanding and later work requests complete with an error, the first one with
     * {@code firstStatus}.
     */
    void enterError(final int firstStatus)
    {
        if (state == STATE_ERROR)
        {
            return;
        }
        state = STATE_ERROR;
        errorStatus = firstStatus;
        requester.onError();
        responder.onError();
    }

    /**
     * @return the status the next flushed send work request completes with.
     */
    int errorStatus()
    {
        return errorStatus;
    }

    /**
     * The error's first status was delivered; the rest flush.
     */
    void errorStatusDelivered()
    {
        errorStatus = CompletionStatus.FLUSH_ERROR;
    }

    private static int toInt(final byte[] address)
    {
        return ((address[0] & 0xFF) << 24) | ((address[1] & 0xFF) << 16) | ((address[2] & 0xFF) << 8) |
            (address[3] & 0xFF);
    }

    @Override
    public String toString()
    {
        return "QueuePair{qpn=" + qpn + ", remoteQpn=" + remoteQpn + ", state=" + state + ", sendPsn=" +
            requester.sendPsn() + ", unackedPsn=" + requester.unackedPsn() + ", expectedPsn=" +
            responder.expectedPsn() + '}';
    }
}
