package io.netreduce.dataplane.aggregator;

import io.netreduce.protocol.port.AnonymousMemory;
import io.netreduce.protocol.wire.Ecn;
import org.agrona.BitUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * One ring's aggregator array, off-heap: 2N x MsgLen aggregators of identical layout, laid out back to back.
 * <pre>
 *   aggregator (stride bytes, 64-byte aligned)
 *     0   int  boundMsg      MsgID the aggregator holds, or FREE
 *     4   int  state         COMPLETE when the result is stored
 *     8   long firstArrival  nanoTime of the first packet (latency histogram)
 *     16  long arrived       bit per rank whose payload is stored
 *     24  long released      bit per rank that has moved one window past this aggregator
 *     32  int  resultCrc     CRC-32 of the stored result payload
 *     40  int  flags         bit 0 (FLAG_CE): a contribution to this position (or, at a leaf, the spine's result)
 *                            arrived with ECN = CE; every packet the position sends carries CE then (PANAMA §4.2)
 *     64  per-rank meta, 16 bytes each:
 *           0 int headerCrc (CRC of masked pseudo-header .. gradient start), 4 short headerLength,
 *           6 byte arrival port, 7 byte UDP offset and 8 byte IP offset in the header
 *     headersOffset   per-rank headers, HEADER_SLOT bytes each: the rank's own frame bytes from the Ethernet
 *                     header to the start of its gradient data (for first packets: including the INA header)
 *     payloadsOffset  per-rank gradient data, payloadSlot bytes each
 *     resultOffset    the sum, payloadSlot bytes (a leaf's partial sum of its rack)
 *     finalOffset     leaf regions only: the spine's result for the position, payloadSlot bytes, its CRC-32 at
 *                     FINAL_CRC_OFFSET (36)
 * </pre>
 * A leaf's aggregator goes FREE, bound, PARTIAL (its rack's sum is in the result slot and was sent up), COMPLETE
 * (the spine's result is in the final slot); a flat or spine aggregator goes FREE, bound, COMPLETE.
 * Accessed through an {@link UnsafeBuffer} (scalar fields, header copies, CRCs over the wrapped
 * {@link ByteBuffer}) and a {@link MemorySegment} (vector summation) over the same memory.
 */
public final class AggregatorRegion implements AutoCloseable
{
    public static final int FREE = -1;
    public static final int COMPLETE = 1;
    /** A leaf's aggregator whose rack sum is stored and was sent up; the spine's result is not in yet. */
    public static final int PARTIAL = 2;

    public static final int BOUND_MSG_OFFSET = 0;
    public static final int STATE_OFFSET = 4;
    public static final int FIRST_ARRIVAL_OFFSET = 8;
    public static final int ARRIVED_OFFSET = 16;
    public static final int RELEASED_OFFSET = 24;
    public static final int RESULT_CRC_OFFSET = 32;
    public static final int FINAL_CRC_OFFSET = 36;
    public static final int FLAGS_OFFSET = 40;
    /** Flag: congestion experienced by some packet of the position (the ECN fields OR-ed, CE kept). */
    public static final int FLAG_CE = 1;
    public static final int RANK_META_OFFSET = 64;
    public static final int RANK_META_LENGTH = 16;
    public static final int META_HEADER_CRC = 0;
    public static final int META_HEADER_LENGTH = 4;
    public static final int META_PORT = 6;
    public static final int META_UDP_OFFSET = 7;
    public static final int META_L3_OFFSET = 8;
    /** Room for Ethernet + 2 VLAN tags + IPv6 + UDP + BTH + RETH + ImmDt + INA header (110 bytes). */
    public static final int HEADER_SLOT = 128;

    private final int ranks;
    private final int aggregators;
    private final int payloadSlot;
    private final int headersOffset;
    private final int payloadsOffset;
    private final int resultOffset;
    private final int finalOffset;
    private final int stride;
    private final AnonymousMemory memory;
    private final MemorySegment segment;
    private final UnsafeBuffer buffer;
    /** Aggregators bound to a message whose result is not in yet: 0 when the ring is quiescent. */
    private int incomplete;

    private AggregatorRegion(final int ranks, final int aggregators, final int payloadSize, final boolean withFinal)
    {
        this.ranks = ranks;
        this.aggregators = aggregators;
        this.payloadSlot = BitUtil.align(payloadSize, BitUtil.CACHE_LINE_LENGTH);
        this.headersOffset = BitUtil.align(RANK_META_OFFSET + ranks * RANK_META_LENGTH, BitUtil.CACHE_LINE_LENGTH);
        this.payloadsOffset = headersOffset + ranks * HEADER_SLOT;
        this.resultOffset = payloadsOffset + ranks * payloadSlot;
        this.finalOffset = withFinal ? resultOffset + payloadSlot : -1;
        this.stride = resultOffset + (withFinal ? 2 : 1) * payloadSlot;
        final long total = (long)stride * aggregators;
        // Mapped, not malloc'd: a removed ring's memory goes back to the system at once and whole (AnonymousMemory).
        this.memory = AnonymousMemory.map(total);
        this.segment = memory.segment();
        this.buffer = new UnsafeBuffer(segment.asByteBuffer());
        for (int i = 0; i < aggregators; i++)
        {
            buffer.putInt(offset(i) + BOUND_MSG_OFFSET, FREE);
        }
    }

    /**
     * @return bytes one aggregator takes.
     */
    public static int strideFor(final int ranks, final int payloadSize)
    {
        return strideFor(ranks, payloadSize, false);
    }

    /**
     * @param withFinal whether the aggregators keep a final slot (leaf regions).
     * @return bytes one aggregator takes.
     */
    public static int strideFor(final int ranks, final int payloadSize, final boolean withFinal)
    {
        final int meta = BitUtil.align(RANK_META_OFFSET + ranks * RANK_META_LENGTH, BitUtil.CACHE_LINE_LENGTH);
        final int slot = BitUtil.align(payloadSize, BitUtil.CACHE_LINE_LENGTH);
        return meta + ranks * HEADER_SLOT + (ranks + (withFinal ? 2 : 1)) * slot;
    }

    /**
     * @return bytes a region of this shape takes.
     */
    public static long bytesFor(final int ranks, final int aggregators, final int payloadSize)
    {
        return bytesFor(ranks, aggregators, payloadSize, false);
    }

    public static long bytesFor(final int ranks, final int aggregators, final int payloadSize, final boolean withFinal)
    {
        return (long)strideFor(ranks, payloadSize, withFinal) * aggregators;
    }

    /**
     * Allocate a region. The memory is zeroed and every aggregator free.
     *
     * @throws IllegalArgumentException when the region would exceed 2 GiB (one ByteBuffer must span it).
     */
    public static AggregatorRegion allocate(final int ranks, final int aggregators, final int payloadSize)
    {
        return allocate(ranks, aggregators, payloadSize, false);
    }

    /**
     * @param withFinal whether each aggregator keeps a final slot besides its result slot (a leaf keeps its
     *                  rack's partial sum, to send up again, and the spine's result, to answer its ranks).
     */
    public static AggregatorRegion allocate(
        final int ranks, final int aggregators, final int payloadSize, final boolean withFinal)
    {
        final long bytes = bytesFor(ranks, aggregators, payloadSize, withFinal);
        if (bytes > Integer.MAX_VALUE)
        {
            throw new IllegalArgumentException("aggregator region of " + bytes + " bytes exceeds 2 GiB");
        }
        return new AggregatorRegion(ranks, aggregators, payloadSize, withFinal);
    }

    public UnsafeBuffer buffer()
    {
        return buffer;
    }

    public MemorySegment segment()
    {
        return segment;
    }

    public int ranks()
    {
        return ranks;
    }

    public int aggregators()
    {
        return aggregators;
    }

    public int stride()
    {
        return stride;
    }

    public int payloadSlot()
    {
        return payloadSlot;
    }

    public long bytes()
    {
        return segment.byteSize();
    }

    /**
     * @return offset of aggregator {@code index} in {@link #buffer()}.
     */
    public int offset(final int index)
    {
        return index * stride;
    }

    public int rankMetaOffset(final int aggregator, final int rank)
    {
        return aggregator + RANK_META_OFFSET + rank * RANK_META_LENGTH;
    }

    public int headerOffset(final int aggregator, final int rank)
    {
        return aggregator + headersOffset + rank * HEADER_SLOT;
    }

    public int payloadOffset(final int aggregator, final int rank)
    {
        return aggregator + payloadsOffset + rank * payloadSlot;
    }

    public int resultOffset(final int aggregator)
    {
        return aggregator + resultOffset;
    }

    /**
     * @return offset of the final slot (leaf regions), or a negative value when the region has none.
     */
    public int finalOffset(final int aggregator)
    {
        return finalOffset < 0 ? -1 : aggregator + finalOffset;
    }

    public boolean hasFinal()
    {
        return finalOffset >= 0;
    }

    /**
     * @return whether a leaf's aggregator holds its rack's sum, sent up, and awaits the spine's result.
     */
    public boolean isPartial(final int aggregator)
    {
        return buffer.getInt(aggregator + STATE_OFFSET) == PARTIAL;
    }

    /**
     * A leaf's aggregator holds its rack's sum; it stays in flight (counted in {@link #incomplete()}) until the
     * spine's result arrives ({@link #markComplete}).
     */
    public void markPartial(final int aggregator)
    {
        buffer.putInt(aggregator + STATE_OFFSET, PARTIAL);
    }

    public int boundMsg(final int aggregator)
    {
        return buffer.getInt(aggregator + BOUND_MSG_OFFSET);
    }

    public boolean isComplete(final int aggregator)
    {
        return buffer.getInt(aggregator + STATE_OFFSET) == COMPLETE;
    }

    public long arrived(final int aggregator)
    {
        return buffer.getLong(aggregator + ARRIVED_OFFSET);
    }

    public long released(final int aggregator)
    {
        return buffer.getLong(aggregator + RELEASED_OFFSET);
    }

    public long firstArrival(final int aggregator)
    {
        return buffer.getLong(aggregator + FIRST_ARRIVAL_OFFSET);
    }

    /**
     * Bind a free aggregator to a message.
     */
    public void bind(final int aggregator, final int msgId, final long nowNs)
    {
        incomplete++;
        buffer.putInt(aggregator + BOUND_MSG_OFFSET, msgId);
        buffer.putInt(aggregator + STATE_OFFSET, 0);
        buffer.putLong(aggregator + FIRST_ARRIVAL_OFFSET, nowNs);
        buffer.putLong(aggregator + ARRIVED_OFFSET, 0L);
        buffer.putLong(aggregator + RELEASED_OFFSET, 0L);
        buffer.putInt(aggregator + FLAGS_OFFSET, 0);
    }

    /**
     * Record a packet's ECN codepoint for the position: CE sticks until the aggregator is bound again.
     */
    public void recordEcn(final int aggregator, final int codepoint)
    {
        if (codepoint == Ecn.CE)
        {
            final int at = aggregator + FLAGS_OFFSET;
            buffer.putInt(at, buffer.getInt(at) | FLAG_CE);
        }
    }

    /**
     * @return whether some packet of the position arrived with ECN = CE since the aggregator was bound.
     */
    public boolean congestionExperienced(final int aggregator)
    {
        return (buffer.getInt(aggregator + FLAGS_OFFSET) & FLAG_CE) != 0;
    }

    /**
     * The aggregator holds its result now.
     */
    public void markComplete(final int aggregator)
    {
        buffer.putInt(aggregator + STATE_OFFSET, COMPLETE);
        incomplete--;
    }

    /**
     * @return aggregators bound to a message whose result is not in yet (0: nothing of the ring is in flight).
     */
    public int incomplete()
    {
        return incomplete;
    }

    public void free(final int aggregator)
    {
        if (boundMsg(aggregator) != FREE && !isComplete(aggregator))
        {
            incomplete--;
        }
        buffer.putInt(aggregator + BOUND_MSG_OFFSET, FREE);
        buffer.putInt(aggregator + STATE_OFFSET, 0);
        buffer.putLong(aggregator + ARRIVED_OFFSET, 0L);
        buffer.putLong(aggregator + RELEASED_OFFSET, 0L);
        buffer.putInt(aggregator + FLAGS_OFFSET, 0);
    }

    /**
     * Free every aggregator (the ring begins a new run: nothing of the previous one may answer or block it).
     */
    public void freeAll()
    {
        for (int i = 0; i < aggregators; i++)
        {
            free(offset(i));
        }
        incomplete = 0;
    }

    /**
     * Release the memory. The region must not be used afterwards.
     */
    @Override
    public void close()
    {
        memory.close();
    }
}
