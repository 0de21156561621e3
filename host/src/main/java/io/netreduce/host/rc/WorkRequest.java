package io.netreduce.host.rc;

/**
 * A send work request: what {@link QueuePair#postSend(WorkRequest)} is asked to do. A mutable, reusable
 * holder (the queue pair copies its fields when it is posted), so an application keeps one and refills it.
 * <p>
 * The message data is {@code length} bytes of {@code localRegion} starting at {@code localOffset}. Whatever the
 * application puts at the start of that range is the start of the first packet's payload: a protocol that
 * needs a per-message prefix (the NetReduce 8-byte INA header) simply writes it into the first bytes of the
 * message data.
 */
public final class WorkRequest
{
    /** RDMA WRITE: FIRST/MIDDLE/LAST or ONLY. */
    public static final int RDMA_WRITE = 0;
    /** RDMA WRITE whose last packet carries immediate data and consumes a receive WR at the responder. */
    public static final int RDMA_WRITE_WITH_IMM = 1;
    /** SEND into the responder's next posted receive buffer. */
    public static final int SEND = 2;
    /** SEND whose last packet carries immediate data. */
    public static final int SEND_WITH_IMM = 3;

    private long wrId;
    private int opcode = RDMA_WRITE;
    private MemoryRegion localRegion;
    private int localOffset;
    private int length;
    private long remoteAddress;
    private int rkey;
    private int immediate;

    public WorkRequest wrId(final long wrId)
    {
        this.wrId = wrId;
        return this;
    }

    public WorkRequest opcode(final int opcode)
    {
        this.opcode = opcode;
        return this;
    }

    public WorkRequest local(final MemoryRegion region, final int offset, final int length)
    {
        this.localRegion = region;
        this.localOffset = offset;
        this.length = length;
        return this;
    }

    /**
     * Target of an RDMA WRITE (ignored for SEND).
     */
    public WorkRequest remote(final long remoteAddress, final int rkey)
    {
        this.remoteAddress = remoteAddress;
        this.rkey = rkey;
        return this;
    }

    public WorkRequest immediate(final int immediate)
    {
        this.immediate = immediate;
        return this;
    }

    public long wrId()
    {
        return wrId;
    }

    public int opcode()
    {
        return opcode;
    }

    public MemoryRegion localRegion()
    {
        return localRegion;
    }

    public int localOffset()
    {
        return localOffset;
    }

    public int length()
    {
        return length;
    }

    public long remoteAddress()
    {
        return remoteAddress;
    }

    public int rkey()
    {
        return rkey;
    }

    public int immediate()
    {
        return immediate;
    }

    public static boolean isWrite(final int opcode)
    {
        return opcode == RDMA_WRITE || opcode == RDMA_WRITE_WITH_IMM;
    }

    public static boolean hasImmediate(final int opcode)
    {
        return opcode == RDMA_WRITE_WITH_IMM || opcode == SEND_WITH_IMM;
    }

    public static String name(final int opcode)
    {
        return switch (opcode)
        {
            case RDMA_WRITE -> "RDMA_WRITE";
            case RDMA_WRITE_WITH_IMM -> "RDMA_WRITE_WITH_IMM";
            case SEND -> "SEND";
            case SEND_WITH_IMM -> "SEND_WITH_IMM";
            default -> "WR_" + opcode;
        };
    }
}
