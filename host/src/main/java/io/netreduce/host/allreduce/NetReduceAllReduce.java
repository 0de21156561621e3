package io.netreduce.host.allreduce;

import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.host.rc.Completion;
import io.netreduce.host.rc.CompletionHandler;
import io.netreduce.host.rc.CompletionStatus;
import io.netreduce.host.rc.QueuePair;
import io.netreduce.host.rc.TraceRecorder;
import io.netreduce.host.rc.WorkRequest;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.Locale;

/**
 * The NetReduce flow-control module (paper 000, §3.1-3.2), worker side.
 * <p>
 * A tensor is cut into messages of {@link NetReduceConfig#dataBytesPerMessage()} tensor bytes. Message k of the
 * ring's life (MsgID = k mod 256; the sequence continues across calls) is laid out in send slot k mod 2N as the
 * 8-byte INA header (InetTag, RingID, MsgID, MsgLen, Rank) followed by its tensor bytes, zero-padded to exactly
 * MsgLen x payloadSize bytes, and posted as one RDMA WRITE WITH IMMEDIATE (immediate = k) into the successor's
 * receive slot k mod 2N. With PMTU = payloadSize the RC layer sends it as MsgLen packets of payloadSize bytes
 * each, the first one starting with the INA header.
 * <p>
 * The appliance sums the W ranks' packets and writes the sum, in place of each rank's data, to that rank's
 * successor. So the result of message k reaches this worker as the WRITE WITH IMMEDIATE completion of its
 * predecessor's message k on the receive queue pair; its data sits in receive slot k mod 2N behind the
 * predecessor's INA header, and is copied into the tensor. Each result advances the window: at most N messages
 * are posted and not yet answered, fewer when results come back ECN-marked ({@link CongestionWindow}: PANAMA's
 * DCTCP-like law, results as implicit acknowledgements, N the cap). A send slot is refilled only after its previous message's send completion,
 * so a retransmission never reads a slot that has been overwritten.
 * <p>
 * <b>Placement mode</b> ({@link #placed}): the link's send and receive regions are the caller's memory in message
 * layout, an <i>input area</i> and an <i>output area</i> of {@code areaMessages x messageBytes} bytes each, message
 * i of a call at offset i x messageBytes, its data behind the 8-byte INA header's place. The caller puts the data
 * of a call's messages into the input area and starts the call with {@link #beginPlaced(int)}; message k (the i-th
 * of the call) is posted straight from input offset i x messageBytes (its header written into the gap in front)
 * to the successor's output area at the same offset, and its result lands in our output area at that offset,
 * where it is checked in place and left: nothing is copied. Nothing writes the input area during a call, so a
 * retransmission carries the bytes the first transmission did. A placed call's sums may be read once
 * {@link #resultsDone()}; it is done when every result has arrived <i>and</i> every one of its own writes has been
 * acknowledged ({@link #writesAcknowledged()}), so that the caller may refill the input area as soon as
 * {@link #isDone()} without a late retransmission reading the next call's data. The two differ by the ACKs' way
 * back from the successor through the appliance, a round trip of other processes' wake-ups: a caller that has other
 * work (the sidecar answering its trainer) takes the sums at {@link #resultsDone()} and keeps polling.
 * <p>
 * If no result arrives for {@link NetReduceConfig#timeoutNs()} (appliance gone, ring removed from it, a rank
 * dead), or a queue pair fails, the call throws {@link AllReduceException}; it never hangs.
 */
public final class NetReduceAllReduce implements AllReduce
{
    /**
     * @return a tag as its four characters, e.g. NRED.
     */
    static String tagText(final int tag)
    {
        return new String(new char[] {
            (char)(tag >>> 24), (char)((tag >>> 16) & 0xFF), (char)((tag >>> 8) & 0xFF), (char)(tag & 0xFF)});
    }

    private final RingLink link;
    private final NetReduceConfig config;
    private final QueuePair sendQp;
    private final UnsafeBuffer sendMemory;
    private final UnsafeBuffer receiveMemory;
    private final WorkRequest wr = new WorkRequest();
    private final CompletionHandler onSend = this::onSendCompletion;
    private final CompletionHandler onReceive = this::onReceiveCompletion;
    private final int messageBytes;
    private final int dataBytes;
    private final int slots;
    /** Messages the input and output areas hold in placement mode; 0 in slot mode. */
    private final int areaMessages;
    private final CongestionWindow congestion;

    /** The call's share of the tensor's messages: message i of the call is the tensor's message first + i x stride. */
    private int shareFirst;
    private int shareStride = 1;
    private long posted;
    private long sendsCompleted;
    private long resultsReceived;
    private long callFirst;
    private long callEnd;
    private Tensor tensor;
    private long lastProgressNs;
    private long bytesPosted;
    private long calls;
    /** When the current placed call's last result arrived (0: not yet, or not a placed call). */
    private long resultsDoneNs;
    /** Placed calls whose own writes were acknowledged only after their last result, and the time they waited. */
    private long callsWaitingForAcks;
    private long ackWaitNs;
    private String failure;

    /**
     * @param link   a connected ring link whose regions hold at least {@link NetReduceConfig#regionBytes()}.
     * @param config the ring's parameters; {@code payloadSize} must equal the endpoint's PMTU.
     */
    public NetReduceAllReduce(final RingLink link, final NetReduceConfig config)
    {
        this(link, config, 0);
    }

    /**
     * Placement mode: the link's send region is the input area and its receive region (the one advertised to the
     * predecessor) the output area, each holding {@code areaMessages} messages in message layout; every rank of
     * the ring must use the same area size. Calls are started with {@link #beginPlaced(int)}.
     *
     * @throws IllegalArgumentException if a region (ours, or the successor's advertised one) is smaller than
     *                                  {@code areaMessages x messageBytes}.
     */
    public static NetReduceAllReduce placed(final RingLink link, final NetReduceConfig config, final int areaMessages)
    {
        if (areaMessages <= 0)
        {
            throw new IllegalArgumentException("areaMessages must be positive: " + areaMessages);
        }
        return new NetReduceAllReduce(link, config, areaMessages);
    }

    private NetReduceAllReduce(final RingLink link, final NetReduceConfig config, final int areaMessages)
    {
        link.requireConnected();
        if (config.payloadSize() != link.endpoint().config().pmtu())
        {
            throw new IllegalArgumentException("payloadSize " + config.payloadSize() + " must equal the PMTU " +
                link.endpoint().config().pmtu() + " so that each message is exactly MsgLen packets");
        }
        if (link.world() > 64)
        {
            throw new IllegalArgumentException("NetReduce rings have at most 64 ranks: " + link.world());
        }
        if (areaMessages > 0)
        {
            final long areaBytes = (long)areaMessages * config.messageBytes();
            if (link.sendRegion().length() < areaBytes || link.receiveRegion().length() < areaBytes ||
                link.successorLength() < areaBytes)
            {
                throw new IllegalArgumentException("placement mode: the input area (" + link.sendRegion().length() +
                    " bytes), the output area (" + link.receiveRegion().length() + ") and the successor's output " +
                    "area (" + link.successorLength() + ") must each hold " + areaMessages + " messages of " +
                    config.messageBytes() + " bytes (MsgLen x payloadSize)");
            }
        }
        else if (link.sendRegion().length() < config.regionBytes() ||
            link.receiveRegion().length() < config.regionBytes() || link.successorLength() < config.regionBytes())
        {
            throw new IllegalArgumentException("ring link regions must hold " + config.regionBytes() + " bytes (2N x " +
                "MsgLen x payloadSize)");
        }
        this.link = link;
        this.config = config;
        this.sendQp = link.sendQp();
        this.sendMemory = link.sendRegion().buffer();
        this.receiveMemory = link.receiveRegion().buffer();
        this.messageBytes = config.messageBytes();
        this.dataBytes = config.dataBytesPerMessage();
        this.slots = config.slots();
        this.areaMessages = areaMessages;
        this.congestion = new CongestionWindow(config.window(), config.congestion());
        // Marked results are acted on by the window, on every rank; a CNP per marked result would make the
        // predecessor's rate limiter act on the same marks again.
        link.receiveQp().congestionNotification(!config.congestion().enabled());
        wr.opcode(WorkRequest.RDMA_WRITE_WITH_IMM);
        link.topUpReceives();
    }

    public NetReduceConfig config()
    {
        return config;
    }

    @Override
    public RingLink link()
    {
        return link;
    }

    /**
     * @return messages needed for a tensor of {@code bytes} bytes.
     */
    public int messagesFor(final int bytes)
    {
        return (bytes + dataBytes - 1) / dataBytes;
    }

    /**
     * @return true in placement mode ({@link #placed}).
     */
    public boolean isPlaced()
    {
        return areaMessages > 0;
    }

    /**
     * @return messages the input and output areas hold (placement mode), 0 in slot mode.
     */
    public int areaMessages()
    {
        return areaMessages;
    }

    /**
     * @throws IllegalStateException in placement mode (use {@link #beginPlaced(int)}).
     */
    @Override
    public void begin(final Tensor tensor)
    {
        if (areaMessages > 0)
        {
            throw new IllegalStateException("this all-reduce works in place on its areas: beginPlaced(messages)");
        }
        shareFirst = 0;
        shareStride = 1;
        start(tensor, messagesFor(tensor.byteLength()));
    }

    /**
     * Start reducing this ring's share of {@code tensor} in place: of the tensor's messages (cut as by
     * {@link #begin(Tensor)}), those numbered {@code first}, {@code first + stride}, {@code first + 2 stride}, ...
     * One aggregation tree of {@code stride} ({@link MultiTreeAllReduce}): tree t takes the messages t mod T, so a
     * job's messages go round robin over its trees (PANAMA §4.1). The other messages are neither read nor written.
     * A share may hold no message (a tensor of fewer messages than trees): the call is done at once.
     *
     * @throws IllegalStateException    in placement mode, after a failure or before the previous call is done.
     * @throws IllegalArgumentException unless {@code 0 <= first < stride}.
     */
    public void beginShare(final Tensor tensor, final int first, final int stride)
    {
        if (areaMessages > 0)
        {
            throw new IllegalStateException("this all-reduce works in place on its areas: beginPlaced(messages)");
        }
        if (stride < 1 || first < 0 || first >= stride)
        {
            throw new IllegalArgumentException("a share needs 0 <= first < stride: first=" + first + " stride=" +
                stride);
        }
        final int total = messagesFor(tensor.byteLength());
        shareFirst = first;
        shareStride = stride;
        start(tensor, total > first ? (total - first + stride - 1) / stride : 0);
    }

    /**
     * Placement mode: sum the first {@code messages} messages of the input area (their data, behind each
     * message's 8 header bytes, which this call writes) into the output area, message i's sum at offset
     * i x messageBytes + 8. Neither area may be touched until {@link #isDone()}.
     *
     * @throws IllegalStateException    in slot mode, after a failure or before the previous call is done.
     * @throws IllegalArgumentException if {@code messages} is not 1..{@link #areaMessages()}.
     */
    public void beginPlaced(final int messages)
    {
        if (areaMessages == 0)
        {
            throw new IllegalStateException("this all-reduce copies through its slots: begin(tensor)");
        }
        if (messages <= 0 || messages > areaMessages)
        {
            throw new IllegalArgumentException("a placed call takes 1.." + areaMessages + " messages (the areas' " +
                "size): " + messages);
        }
        start(null, messages);
    }

    private void start(final Tensor tensor, final int messages)
    {
        if (failure != null)
        {
            throw new IllegalStateException("NetReduce all-reduce failed earlier: " + failure);
        }
        if (!isDone())
        {
            throw new IllegalStateException("previous all-reduce has not finished");
        }
        this.tensor = tensor;
        callFirst = posted;
        callEnd = posted + messages;
        lastProgressNs = link.clock().nanoTime();
        calls++;
        // The call's first window is posted, and nothing that arrived is looked at until the caller's next endpoint
        // duty cycle has sent it (begin, then doWork, then poll): if what arrived is a neighbour's message passed
        // through unaggregated (the ring not installed), this rank fails on it in that poll, with its own messages
        // already on the wire, so its successor fails for the same reason at once instead of when its call times
        // out. (A poll here found it before the window was sent; a driver that ended on the failure never sent it.)
        postMessages();
    }

    /**
     * @return true once every result of the call is in place; in placement mode also every one of the call's
     * writes acknowledged (so the input area may be refilled).
     */
    @Override
    public boolean isDone()
    {
        return resultsDone() && (areaMessages == 0 || writesAcknowledged());
    }

    /**
     * @return true once every result of the call is in place (checked), whether or not its own writes have been
     * acknowledged yet: in placement mode the output area may be read, but the input area not yet refilled
     * (see {@link #writesAcknowledged()}); keep polling until {@link #isDone()}.
     */
    public boolean resultsDone()
    {
        return resultsReceived == callEnd;
    }

    /**
     * @return true once every write of the call has been acknowledged by the successor: nothing will read the input
     * area for this call again, not even a retransmission.
     */
    public boolean writesAcknowledged()
    {
        return sendsCompleted == callEnd;
    }

    @Override
    public int poll()
    {
        if (failure != null)
        {
            throw new AllReduceException(failure);
        }
        int work = link.pollCompletions(onSend, onReceive);
        if (failure != null)
        {
            throw new AllReduceException(failure);
        }
        work += link.topUpReceives();
        work += postMessages();
        if (work > 0)
        {
            lastProgressNs = link.clock().nanoTime();
        }
        else if (!isDone() && link.clock().nanoTime() - lastProgressNs > config.timeoutNs())
        {
            fail(String.format(Locale.ROOT, "no result from the appliance for %d ms on ring %d: %d of %d " +
                "messages of this call answered (message %d awaited); appliance gone, ring not installed or " +
                "removed, or a rank stopped? %s", config.timeoutNs() / 1_000_000, config.ringId(),
                resultsReceived - callFirst, callEnd - callFirst, resultsReceived, link.describe()));
            throw new AllReduceException(failure);
        }
        return work;
    }

    private int postMessages()
    {
        int work = 0;
        while (posted < callEnd && posted - resultsReceived < congestion.window() && posted - sendsCompleted < slots)
        {
            final int slotOffset = offsetOf(posted);
            InaHeader.write(sendMemory, slotOffset, config.inetTag(), config.ringId(), (int)(posted & 0xFF),
                config.msgLen(), link.rank());
            if (areaMessages == 0)
            {
                final int tensorOffset = tensorOffset(posted);
                final int length = Math.min(dataBytes, tensor.byteLength() - tensorOffset);
                sendMemory.putBytes(slotOffset + InaHeader.LENGTH, tensor.buffer(), tensor.offset() + tensorOffset,
                    length);
                if (length < dataBytes)
                {
                    sendMemory.setMemory(slotOffset + InaHeader.LENGTH + length, dataBytes - length, (byte)0);
                }
            }
            wr.wrId(posted)
                .local(link.sendRegion(), slotOffset, messageBytes)
                .remote(link.successorVa() + slotOffset, link.successorRkey())
                .immediate((int)posted);
            final int status = sendQp.postSend(wr);
            if (status == QueuePair.POST_QUEUE_FULL)
            {
                break;
            }
            if (status != QueuePair.POST_OK)
            {
                fail("posting message " + posted + " failed (status " + status + "): " + link.describe());
                throw new AllReduceException(failure);
            }
            link.endpoint().trace().record(link.endpoint().nanoTime(), TraceRecorder.MESSAGE_POSTED,
                sendQp.qpn(), posted);
            posted++;
            bytesPosted += messageBytes;
            work++;
        }
        return work;
    }

    private void onSendCompletion(final Completion completion)
    {
        if (!completion.isSuccess())
        {
            fail("send of message " + completion.wrId() + " failed: " + CompletionStatus.name(completion.status()) +
                " (" + link.describe() + ")");
            return;
        }
        if (completion.wrId() != sendsCompleted)
        {
            fail("send completion for message " + completion.wrId() + " where " + sendsCompleted + " was expected");
            return;
        }
        sendsCompleted++;
        if (sendsCompleted == callEnd && resultsDoneNs != 0)
        {
            // the results were all in before this call's last write was acknowledged (placement mode)
            callsWaitingForAcks++;
            ackWaitNs += link.clock().nanoTime() - resultsDoneNs;
            resultsDoneNs = 0;
        }
    }

    private void onReceiveCompletion(final Completion completion)
    {
        if (failure != null)
        {
            return;
        }
        if (!completion.isSuccess())
        {
            fail(link.receiveFailure(completion));
            return;
        }
        final long seq = resultsReceived;
        if (completion.opcode() != Completion.OP_RECV_RDMA_WITH_IMM || completion.immediate() != (int)seq ||
            completion.byteLength() != messageBytes)
        {
            fail("expected the result of message " + seq + " (RDMA WRITE WITH IMMEDIATE " + (int)seq + ", " +
                messageBytes + " bytes), got " + completion);
            return;
        }
        if (seq >= callEnd)
        {
            fail("result of message " + seq + " arrived before this worker sent it");
            return;
        }
        final int slotOffset = offsetOf(seq);
        if (config.marksResults() && InaHeader.inetTag(receiveMemory, slotOffset) == config.inetTag())
        {
            fail("message " + seq + " from rank " + link.predecessor() + " arrived unaggregated (INA tag " +
                tagText(config.inetTag()) + ", not the appliance's result tag " + tagText(config.resultTag()) +
                "): ring " + config.ringId() + " is not installed on the appliance, or the traffic bypasses it");
            return;
        }
        if (InaHeader.inetTag(receiveMemory, slotOffset) != config.resultTag() ||
            InaHeader.ringId(receiveMemory, slotOffset) != config.ringId() ||
            InaHeader.msgId(receiveMemory, slotOffset) != (int)(seq & 0xFF) ||
            InaHeader.msgLen(receiveMemory, slotOffset) != config.msgLen() ||
            InaHeader.rank(receiveMemory, slotOffset) != link.predecessor())
        {
            fail(String.format(Locale.ROOT, "result of message %d carries INA header tag=0x%08x ring=%d msg=%d " +
                "len=%d rank=%d; expected ring %d msg %d len %d rank %d", seq,
                InaHeader.inetTag(receiveMemory, slotOffset), InaHeader.ringId(receiveMemory, slotOffset),
                InaHeader.msgId(receiveMemory, slotOffset), InaHeader.msgLen(receiveMemory, slotOffset),
                InaHeader.rank(receiveMemory, slotOffset), config.ringId(), seq & 0xFF, config.msgLen(),
                link.predecessor()));
            return;
        }
        if (areaMessages == 0)
        {
            final int tensorOffset = tensorOffset(seq);
            final int length = Math.min(dataBytes, tensor.byteLength() - tensorOffset);
            tensor.buffer().putBytes(tensor.offset() + tensorOffset, receiveMemory, slotOffset + InaHeader.LENGTH,
                length);
        }
        link.endpoint().trace().record(link.endpoint().nanoTime(), TraceRecorder.RESULT_RECEIVED,
            link.receiveQp().qpn(), seq);
        resultsReceived++;
        congestion.onResult(completion.markedPackets(), completion.packets());
        if (resultsReceived == callEnd && areaMessages != 0 && sendsCompleted < callEnd)
        {
            resultsDoneNs = link.clock().nanoTime();
        }
    }

    /**
     * @return where message {@code k}'s data begins in the call's tensor: the call's i-th message is the tensor's
     * message first + i x stride of its share (first 0, stride 1 for the whole tensor).
     */
    private int tensorOffset(final long k)
    {
        return (shareFirst + (int)(k - callFirst) * shareStride) * dataBytes;
    }

    /**
     * @return where message {@code k} sits in the send region and lands in the receive regions: its slot in slot
     * mode, its place in the call in placement mode.
     */
    private int offsetOf(final long k)
    {
        return (int)(areaMessages == 0 ? k % slots : k - callFirst) * messageBytes;
    }

    private void fail(final String reason)
    {
        if (failure == null)
        {
            failure = reason;
        }
    }

    /**
     * @return messages posted over the ring's life (the next MsgID is this mod 256).
     */
    public long messagesPosted()
    {
        return posted;
    }

    public long resultsReceived()
    {
        return resultsReceived;
    }

    @Override
    public long bytesPosted()
    {
        return bytesPosted;
    }

    public long calls()
    {
        return calls;
    }

    /**
     * @return placed calls that had every result before every one of their own writes was acknowledged: the calls
     * whose end waited for ACKs (see {@link #ackWaitNs()}).
     */
    public long callsWaitingForAcks()
    {
        return callsWaitingForAcks;
    }

    /**
     * @return the time placed calls spent, after their last result, waiting for their own writes' ACKs (the
     * successor's, through the appliance): what a caller waiting for {@link #isDone()} waits beyond
     * {@link #resultsDone()} (the sidecar answers at the latter, and its trainer waits for this only when it refills
     * the input area before the ACKs are in).
     */
    public long ackWaitNs()
    {
        return ackWaitNs;
    }

    /**
     * @return the window and what it has seen: current window, alpha, marked results (read on the driving thread).
     */
    public CongestionWindow congestion()
    {
        return congestion;
    }
}
