package io.netreduce.host.allreduce;

import io.netreduce.protocol.element.ElementType;
import io.netreduce.host.rc.Completion;
import io.netreduce.host.rc.CompletionHandler;
import io.netreduce.host.rc.CompletionStatus;
import io.netreduce.host.rc.MemoryRegion;
import io.netreduce.host.rc.QueuePair;
import io.netreduce.host.rc.WorkRequest;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.Locale;

/**
 * Ring all-reduce (reduce-scatter then all-gather, W-1 steps each) over the same RC connections NetReduce uses:
 * the baseline NetReduce is measured against, and the fallback when no appliance serves the ring.
 * <p>
 * The tensor is copied into the send region ("work") and cut into W chunks of ceil(n/W) elements (the last ones
 * zero-padded). Reduce-scatter step s: rank r writes chunk (r - s) mod W of work into the successor's
 * reduce-scatter area and adds chunk (r - s - 1) mod W, received from its predecessor, into work; after W-1
 * steps work holds the full sum of chunk (r + 1) mod W. All-gather step s: rank r writes chunk (r + 1 - s) mod W
 * (its own at s = 0, afterwards the one it just received) into the successor's all-gather area. Each chunk is
 * sent as segments of at most {@code segmentBytes}, each an RDMA WRITE WITH IMMEDIATE, and a segment of step
 * s + 1 goes out as soon as the same segment of step s has arrived, so the steps pipeline.
 * <p>
 * The receive region holds two areas of W chunks (reduce-scatter, all-gather), so every byte the predecessor
 * writes in a call has its own place and is never overwritten while in use; work chunks are never modified
 * after they have been sent; and a call ends only when all its sends are acknowledged. So no credits are needed.
 * <p>
 * Arithmetic: fp32 and int32 add element-wise; fp16 and bf16 are widened to fp32, added and rounded back at every
 * step (see {@link Arithmetic#add}). Chunk c is reduced in the order c, c+1, ..., c+W-1, so float results are
 * deterministic but not bit-identical to the appliance's rank-order sum ({@link Arithmetic#ringOrderSum}).
 */
public final class RingAllReduce implements AllReduce
{
    /** Default segment size: large enough to amortise completions, small enough to pipeline the steps. */
    public static final int DEFAULT_SEGMENT_BYTES = 256 * 1024;

    private final RingLink link;
    private final int segmentBytes;
    private final long timeoutNs;
    private final QueuePair sendQp;
    private final MemoryRegion workRegion;
    private final MemoryRegion receive;
    private final UnsafeBuffer workMemory;
    private final UnsafeBuffer receiveMemory;
    private final WorkRequest wr = new WorkRequest();
    private final CompletionHandler onSend = this::onSendCompletion;
    private final CompletionHandler onReceive = this::onReceiveCompletion;
    private final int rank;
    private final int world;

    private Tensor tensor;
    private ElementType type;
    private int chunkBytes;
    private int padded;
    private int segments;
    private int total;
    private int sent;
    private int sendsCompleted;
    private int received;
    /** Segments of the next call that arrived after this call had received all of its own (see onReceive). */
    private int early;
    private int callTag;
    private long lastProgressNs;
    private boolean running;
    private long bytesPosted;
    private String failure;

    /**
     * @param link         a connected ring link; its send region must hold {@link #sendRegionBytes} and every
     *                     receive region {@link #receiveRegionBytes} for the largest tensor.
     * @param segmentBytes largest RDMA WRITE, a positive multiple of 4.
     * @param timeoutNs    longest wait for the next completion before the call fails.
     */
    public RingAllReduce(final RingLink link, final int segmentBytes, final long timeoutNs)
    {
        link.requireConnected();
        if (segmentBytes <= 0 || (segmentBytes & 3) != 0)
        {
            throw new IllegalArgumentException("segmentBytes must be a positive multiple of 4: " + segmentBytes);
        }
        if (timeoutNs <= 0)
        {
            throw new IllegalArgumentException("timeoutNs must be positive: " + timeoutNs);
        }
        this.link = link;
        this.segmentBytes = segmentBytes;
        this.timeoutNs = timeoutNs;
        this.sendQp = link.sendQp();
        this.workRegion = link.sendRegion();
        this.receive = link.receiveRegion();
        this.workMemory = workRegion.buffer();
        this.receiveMemory = receive.buffer();
        this.rank = link.rank();
        this.world = link.world();
        link.topUpReceives();
    }

    /**
     * @return send region bytes for tensors of up to {@code maxTensorBytes} bytes on a ring of {@code world}.
     */
    public static int sendRegionBytes(final int maxTensorBytes, final int world)
    {
        return Math.max(4, maxTensorBytes + 4 * world);
    }

    /**
     * @return receive region bytes (two areas of W chunks).
     */
    public static int receiveRegionBytes(final int maxTensorBytes, final int world)
    {
        return 2 * sendRegionBytes(maxTensorBytes, world);
    }

    @Override
    public RingLink link()
    {
        return link;
    }

    @Override
    public void begin(final Tensor tensor)
    {
        if (failure != null)
        {
            throw new IllegalStateException("ring all-reduce failed earlier: " + failure);
        }
        if (running)
        {
            throw new IllegalStateException("previous all-reduce has not finished");
        }
        final int size = tensor.type().size();
        final int chunkElements = (tensor.elements() + world - 1) / world;
        final int chunk = chunkElements * size;
        final long paddedBytes = (long)chunk * world;
        if (paddedBytes > workRegion.length() || 2 * paddedBytes > receive.length() ||
            2 * paddedBytes > link.successorLength())
        {
            throw new IllegalArgumentException("tensor of " + tensor.byteLength() + " bytes is larger than the " +
                "ring link's regions allow");
        }
        this.tensor = tensor;
        this.type = tensor.type();
        this.chunkBytes = chunk;
        this.padded = (int)paddedBytes;
        this.segments = Math.max(1, (chunk + segmentBytes - 1) / segmentBytes);
        this.total = 2 * (world - 1) * segments;
        if (total >= 1 << 24)
        {
            throw new IllegalArgumentException("tensor needs " + total + " segments; raise segmentBytes");
        }
        workMemory.putBytes(0, tensor.buffer(), tensor.offset(), tensor.byteLength());
        workMemory.setMemory(tensor.byteLength(), padded - tensor.byteLength(), (byte)0);
        sent = 0;
        sendsCompleted = 0;
        received = 0;
        callTag = (callTag + 1) & 0xFF;
        running = true;
        // The predecessor may have started this call while we were still waiting for our previous sends' ACKs:
        // its first segments are already in the receive region, in order; take them now that work is set up.
        final int alreadyArrived = early;
        early = 0;
        for (int i = 0; i < alreadyArrived; i++)
        {
            accept();
        }
        lastProgressNs = link.clock().nanoTime();
        poll();
    }

    @Override
    public boolean isDone()
    {
        return !running;
    }

    @Override
    public int poll()
    {
        if (failure != null)
        {
            throw new AllReduceException(failure);
        }
        if (!running)
        {
            return 0;
        }
        int work = link.pollCompletions(onSend, onReceive);
        if (failure != null)
        {
            throw new AllReduceException(failure);
        }
        work += link.topUpReceives();
        work += postSends();
        if (received == total && sendsCompleted == total)
        {
            finish();
            return work + 1;
        }
        if (work > 0)
        {
            lastProgressNs = link.clock().nanoTime();
        }
        else if (link.clock().nanoTime() - lastProgressNs > timeoutNs)
        {
            failure = String.format(Locale.ROOT, "ring all-reduce stalled for %d ms: %d of %d segments received, " +
                "%d of %d sent, %d acknowledged; a rank stopped? %s", timeoutNs / 1_000_000, received, total, sent,
                total, sendsCompleted, link.describe());
            throw new AllReduceException(failure);
        }
        return work;
    }

    private int postSends()
    {
        int work = 0;
        while (sent < total && (sent < segments || sent - segments < received))
        {
            final int step = sent / segments;
            final int segment = sent % segments;
            final int within = segment * segmentBytes;
            final int length = Math.max(0, Math.min(segmentBytes, chunkBytes - within));
            final MemoryRegion source;
            final int sourceOffset;
            final int remoteOffset;
            if (step < world - 1)
            {
                final int chunk = Math.floorMod(rank - step, world);
                source = workRegion;
                sourceOffset = chunk * chunkBytes + within;
                remoteOffset = sourceOffset;
            }
            else
            {
                final int gather = step - (world - 1);
                final int chunk = Math.floorMod(rank + 1 - gather, world);
                source = gather == 0 ? workRegion : receive;
                sourceOffset = (gather == 0 ? 0 : padded) + chunk * chunkBytes + within;
                remoteOffset = padded + chunk * chunkBytes + within;
            }
            wr.wrId(sent)
                .opcode(WorkRequest.RDMA_WRITE_WITH_IMM)
                .local(source, sourceOffset, length)
                .remote(link.successorVa() + remoteOffset, link.successorRkey())
                .immediate(callTag << 24 | sent);
            final int status = sendQp.postSend(wr);
            if (status == QueuePair.POST_QUEUE_FULL)
            {
                break;
            }
            if (status != QueuePair.POST_OK)
            {
                failure = "posting ring segment " + sent + " failed (status " + status + "): " + link.describe();
                throw new AllReduceException(failure);
            }
            sent++;
            bytesPosted += length;
            work++;
        }
        return work;
    }

    private void onSendCompletion(final Completion completion)
    {
        if (!completion.isSuccess())
        {
            fail("ring segment " + completion.wrId() + " send failed: " + CompletionStatus.name(completion.status()) +
                " (" + link.describe() + ")");
            return;
        }
        sendsCompleted++;
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
        if (received == total && completion.opcode() == Completion.OP_RECV_RDMA_WITH_IMM &&
            completion.immediate() == (((callTag + 1) & 0xFF) << 24 | early))
        {
            // Everything of this call has arrived, but our own last sends are not acknowledged yet, and the
            // predecessor, done, has started the next call. Its writes land in the reduce-scatter area, whose data
            // of this call has all been consumed, and the next call's writes cannot reach the all-gather area
            // before this rank sends again; so they wait there, counted, for begin().
            early++;
            return;
        }
        final int expected = callTag << 24 | received;
        if (completion.opcode() != Completion.OP_RECV_RDMA_WITH_IMM || completion.immediate() != expected ||
            received >= total)
        {
            fail("expected ring segment " + received + " of call tag " + callTag + ", got " + completion);
            return;
        }
        accept();
    }

    /**
     * Take segment {@code received} of the current call from the receive region.
     */
    private void accept()
    {
        final int step = received / segments;
        if (step < world - 1)
        {
            final int segment = received % segments;
            final int within = segment * segmentBytes;
            final int length = Math.max(0, Math.min(segmentBytes, chunkBytes - within));
            final int at = Math.floorMod(rank - step - 1, world) * chunkBytes + within;
            Arithmetic.addInto(type, workMemory, at, receiveMemory, at, length);
        }
        received++;
    }

    private void finish()
    {
        final int own = (rank + 1) % world;
        final int bytes = tensor.byteLength();
        for (int chunk = 0; chunk < world; chunk++)
        {
            final int from = chunk * chunkBytes;
            final int length = Math.min(chunkBytes, bytes - from);
            if (length <= 0)
            {
                break;
            }
            if (chunk == own)
            {
                tensor.buffer().putBytes(tensor.offset() + from, workMemory, from, length);
            }
            else
            {
                tensor.buffer().putBytes(tensor.offset() + from, receiveMemory, padded + from, length);
            }
        }
        running = false;
        tensor = null;
    }

    private void fail(final String reason)
    {
        if (failure == null)
        {
            failure = reason;
        }
    }

    @Override
    public long bytesPosted()
    {
        return bytesPosted;
    }
}
