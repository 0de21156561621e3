package io.netreduce.host.rc;

/**
 * One work completion as seen by a {@link CompletionHandler}: a view the {@link CompletionQueue} refills for
 * every entry, so copy what must outlive the callback.
 */
public final class Completion
{
    /** Completion of an RDMA WRITE work request (either flavour). */
    public static final int OP_RDMA_WRITE = 0;
    /** Completion of a SEND work request (either flavour). */
    public static final int OP_SEND = 1;
    /** A SEND arrived into a posted receive buffer. */
    public static final int OP_RECV = 2;
    /** An RDMA WRITE WITH IMMEDIATE arrived; it consumed a posted receive (its buffer is untouched). */
    public static final int OP_RECV_RDMA_WITH_IMM = 3;

    long wrId;
    int status;
    int opcode;
    int byteLength;
    int immediate;
    boolean hasImmediate;
    int qpn;
    int markedPackets;
    int packets;

    public long wrId()
    {
        return wrId;
    }

    /**
     * @return a {@link CompletionStatus} code.
     */
    public int status()
    {
        return status;
    }

    public boolean isSuccess()
    {
        return status == CompletionStatus.SUCCESS;
    }

    /**
     * @return one of the {@code OP_*} values.
     */
    public int opcode()
    {
        return opcode;
    }

    /**
     * @return bytes received (receive completions) or bytes sent (send completions).
     */
    public int byteLength()
    {
        return byteLength;
    }

    public int immediate()
    {
        return immediate;
    }

    public boolean hasImmediate()
    {
        return hasImmediate;
    }

    /**
     * @return the local queue pair number the completion belongs to.
     */
    public int qpn()
    {
        return qpn;
    }

    /**
     * @return for a receive completion: how many of the received message's accepted packets arrived with ECN = CE (a
     * switch on their path, or an aggregating appliance that OR-ed its contributions' marks, saw congestion); 0 for
     * any other completion. Verbs does not report this; the software endpoint does, so that a NetReduce worker can
     * treat results as marked implicit acknowledgements and count the marked fraction of their packets, as PANAMA's
     * law does (§4.2; a message is {@link #packets()} of them).
     */
    public int markedPackets()
    {
        return markedPackets;
    }

    /**
     * @return for a receive completion: the packets the received message came in (0 for any other completion).
     */
    public int packets()
    {
        return packets;
    }

    public static String opcodeName(final int opcode)
    {
        return switch (opcode)
        {
            case OP_RDMA_WRITE -> "RDMA_WRITE";
            case OP_SEND -> "SEND";
            case OP_RECV -> "RECV";
            case OP_RECV_RDMA_WITH_IMM -> "RECV_RDMA_WITH_IMM";
            default -> "OP_" + opcode;
        };
    }

    @Override
    public String toString()
    {
        return "Completion{wrId=" + wrId + ", status=" + CompletionStatus.name(status) + ", opcode=" +
            opcodeName(opcode) + ", byteLength=" + byteLength + (hasImmediate ? ", imm=" + immediate : "") +
            ", qpn=" + qpn + (markedPackets > 0 ? ", CE " + markedPackets + "/" + packets : "") + '}';
    }
}
