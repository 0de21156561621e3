package io.netreduce.dataplane.ring;

import java.util.Arrays;

/**
 * Where each message a ring's connections started began. Per rank and per array slot (MsgID % 2N) the MsgID and
 * PSN0 of the message the rank's connection last started in that slot, so that a packet retransmitted from the
 * middle of an older message (go-back-N, after the CLT has moved on to a newer message) still finds its message
 * and position, and the CRC of that first packet's gradient bytes, so that a first packet on the sequence with
 * other bytes is known not to be a retransmission. A leaf keeps the same record, per slot, for the spine results
 * on its entering connection. Owned by the dataplane thread.
 */
public final class MessageStarts
{
    private final int slots;
    private final int[] slotMsg;
    private final int[] slotPsn0;
    private final int[] slotCrc;
    /** A leaf's record, per array slot, of the MsgID and PSN0 of the spine result last started on its entering connection. */
    private final int[] downSlotMsg;
    private final int[] downSlotPsn0;

    MessageStarts(final int ranks, final int slots)
    {
        this.slots = slots;
        this.slotMsg = new int[ranks * slots];
        this.slotPsn0 = new int[ranks * slots];
        this.slotCrc = new int[ranks * slots];
        Arrays.fill(slotMsg, -1);
        this.downSlotMsg = new int[slots];
        this.downSlotPsn0 = new int[slots];
        Arrays.fill(downSlotMsg, -1);
    }

    /**
     * The rank has a new connection: what its old one started is forgotten.
     */
    void forgetRank(final int rank)
    {
        Arrays.fill(slotMsg, rank * slots, (rank + 1) * slots, -1);
    }

    public int slotMsg(final int rank, final int slot)
    {
        return slotMsg[rank * slots + slot];
    }

    public int slotPsn0(final int rank, final int slot)
    {
        return slotPsn0[rank * slots + slot];
    }

    /**
     * @return the CRC-32 of the gradient bytes of the first packet recorded for the slot.
     */
    public int slotCrc(final int rank, final int slot)
    {
        return slotCrc[rank * slots + slot];
    }

    /**
     * Record that the rank's connection started message {@code msgId} at {@code psn0}, its first packet carrying
     * gradient bytes whose CRC-32 is {@code gradientCrc} (a go-back-N retransmission carries the same bytes).
     */
    public void recordMessageStart(final int rank, final int msgId, final int psn0, final int gradientCrc)
    {
        final int index = rank * slots + (msgId & (slots - 1));
        slotMsg[index] = msgId;
        slotPsn0[index] = psn0;
        slotCrc[index] = gradientCrc;
    }

    public int downSlotMsg(final int slot)
    {
        return downSlotMsg[slot];
    }

    public int downSlotPsn0(final int slot)
    {
        return downSlotPsn0[slot];
    }

    /**
     * A leaf saw the spine's result for message {@code msgId} begin at {@code psn0} on its entering connection.
     */
    public void recordDownStart(final int msgId, final int psn0)
    {
        final int index = msgId & (slots - 1);
        downSlotMsg[index] = msgId;
        downSlotPsn0[index] = psn0;
    }

    /**
     * The entering connection is a new one (a new QP, or a new job on it): its message records are forgotten.
     */
    public void forgetDownStarts()
    {
        Arrays.fill(downSlotMsg, -1);
    }
}
