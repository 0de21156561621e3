package io.netreduce.controlplane.config;

import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.protocol.element.ElementType;

import com.fasterxml.jackson.annotation.JsonIgnore;

import java.util.List;

/**
 * A ring: one all-reduce group of a job, aggregated by the appliance.
 *
 * @param id          the ring id carried in the INA header (8 bits, unique across the whole configuration).
 * @param elementType the element type summed.
 * @param window      N: messages in flight per rank; the appliance keeps 2N messages of aggregators.
 * @param msgLen      packets per message.
 * @param payloadSize payload bytes per packet (a whole number of elements, at most the PMTU).
 * @param pmtu        the RoCE path MTU of the members' connections.
 * @param members     the ranks, one per worker.
 */
public record RingConfig(
    int id,
    ElementType elementType,
    int window,
    int msgLen,
    int payloadSize,
    int pmtu,
    List<MemberConfig> members)
{
    /** Largest ring id: the INA header carries it in 8 bits. */
    public static final int MAX_ID = 255;
    /**
     * Largest window. MsgID is 8 bits and the aggregator index is {@code MsgID % 2N}, which only stays consistent
     * across the MsgID wrap when 2N divides 256: N must be a power of two up to 128.
     */
    public static final int MAX_WINDOW = 128;
    /** Largest MsgLen: 8 bits in the INA header. */
    public static final int MAX_MSG_LEN = 255;
    /** Smallest world size that is a reduction. */
    public static final int MIN_WORLD_SIZE = 2;
    /**
     * Largest world size. Ranks are 8 bits in the INA header, but the dataplane keeps one 64-bit rank bitmap per
     * aggregator, so a ring has at most {@link RingDefinition#MAX_RANKS} ranks.
     */
    public static final int MAX_WORLD_SIZE = RingDefinition.MAX_RANKS;
    /** The RoCE path MTUs. */
    public static final List<Integer> PMTUS = List.of(256, 512, 1024, 2048, 4096);

    /**
     * Canonical constructor: copies the member list so the record is immutable.
     */
    public RingConfig
    {
        members = List.copyOf(members);
    }

    /**
     * @return the number of ranks.
     */
    @JsonIgnore
    public int worldSize()
    {
        return members.size();
    }

    /**
     * @return the aggregator memory this ring is budgeted, see {@link AggregatorMemory#bytesPerRing}.
     */
    @JsonIgnore
    public long aggregatorBytes()
    {
        return AggregatorMemory.bytesPerRing(worldSize(), window, msgLen, payloadSize);
    }
}
