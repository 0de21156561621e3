package io.netreduce.host.rc;

import org.agrona.BitUtil;

/**
 * A bounded ring of work completions, like an ibverbs CQ. Queue pairs write into it during
 * {@link RcEndpoint#doWork()}; the application drains it with {@link #poll(CompletionHandler, int)} on the same
 * thread. One queue may serve several queue pairs and both directions of a queue pair.
 * <p>
 * A full queue never loses a completion: a requester keeps the finished work request until there is room, and
 * a responder drops (does not acknowledge) the packet that would complete a receive, so the peer retransmits.
 * Both cases are counted ({@link QpCounters#completionQueueFull()}).
 */
public final class CompletionQueue
{
    private final int mask;
    private final long[] wrIds;
    private final int[] statuses;
    private final int[] opcodes;
    private final int[] byteLengths;
    private final int[] immediates;
    private final boolean[] hasImmediates;
    private final int[] qpns;
    private final int[] markedPackets;
    private final int[] packets;
    private final Completion view = new Completion();
    private long head;
    private long tail;

    /**
     * @param capacity entries, rounded up to a power of two.
     */
    public CompletionQueue(final int capacity)
    {
        final int size = BitUtil.findNextPositivePowerOfTwo(Math.max(2, capacity));
        mask = size - 1;
        wrIds = new long[size];
        statuses = new int[size];
        opcodes = new int[size];
        byteLengths = new int[size];
        immediates = new int[size];
        hasImmediates = new boolean[size];
        qpns = new int[size];
        markedPackets = new int[size];
        packets = new int[size];
    }

    public int capacity()
    {
        return mask + 1;
    }

    public int size()
    {
        return (int)(tail - head);
    }

    public boolean hasSpace()
    {
        return tail - head <= mask;
    }

    boolean offer(
        final long wrId,
        final int status,
        final int opcode,
        final int byteLength,
        final boolean hasImmediate,
        final int immediate,
        final int qpn)
    {
        return offer(wrId, status, opcode, byteLength, hasImmediate, immediate, qpn, 0, 0);
    }

    /**
     * @param markedPackets a receive completion's packets that arrived marked ECN = CE.
     * @param packets       the packets a receive completion's message came in.
     */
    boolean offer(
        final long wrId,
        final int status,
        final int opcode,
        final int byteLength,
        final boolean hasImmediate,
        final int immediate,
        final int qpn,
        final int markedPackets,
        final int packets)
    {
        if (!hasSpace())
        {
            return false;
        }
        final int index = (int)(tail & mask);
        wrIds[index] = wrId;
        statuses[index] = status;
        opcodes[index] = opcode;
        byteLengths[index] = byteLength;
        immediates[index] = immediate;
        hasImmediates[index] = hasImmediate;
        qpns[index] = qpn;
        this.markedPackets[index] = markedPackets;
        this.packets[index] = packets;
        tail++;
        return true;
    }

    /**
     * Deliver up to {@code limit} completions, oldest first.
     *
     * @return how many were delivered.
     */
    public int poll(final CompletionHandler handler, final int limit)
    {
        int count = 0;
        while (count < limit && head < tail)
        {
            final int index = (int)(head & mask);
            view.wrId = wrIds[index];
            view.status = statuses[index];
            view.opcode = opcodes[index];
            view.byteLength = byteLengths[index];
            view.immediate = immediates[index];
            view.hasImmediate = hasImmediates[index];
            view.qpn = qpns[index];
            view.markedPackets = markedPackets[index];
            view.packets = packets[index];
            head++;
            count++;
            handler.onCompletion(view);
        }
        return count;
    }
}
