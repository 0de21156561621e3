package io.netreduce.controlplane.config;

import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.wire.InaHeader;

import com.fasterxml.jackson.annotation.JsonIgnore;
import com.fasterxml.jackson.annotation.JsonInclude;

import java.util.List;
import java.util.Optional;

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
 * @param inetTag     the InetTag the ring's workers write (4 ASCII characters, default "NRED").
 * @param resultTag   the InetTag the appliance writes into results (4 ASCII characters, default "NRES"); the same
 *                    as {@code inetTag} leaves results unmarked, for clients that check for their own tag (a
 *                    bypassed ring can then not be told from a sum).
 * @param spine       for a multi-rack ring, the name of the spine appliance; null for a flat (single-rack) ring.
 * @param racks       for a multi-rack ring, its racks in ring order (at least 2); empty for a flat ring. Every
 *                    appliance of the job reads the same ring and takes its role by its own name.
 * @param appliance   for a flat ring that is one of a job's aggregation trees (PANAMA §4.1), the name of the one
 *                    appliance that aggregates it; null for a flat ring every appliance that holds it installs.
 */
public record RingConfig(
    int id,
    ElementType elementType,
    int window,
    int msgLen,
    int payloadSize,
    int pmtu,
    List<MemberConfig> members,
    String inetTag,
    String resultTag,
    @JsonInclude(JsonInclude.Include.NON_NULL) String spine,
    @JsonInclude(JsonInclude.Include.NON_EMPTY) List<RackConfig> racks,
    @JsonInclude(JsonInclude.Include.NON_NULL) String appliance)
{
    /** The default request tag, "NRED". */
    public static final String DEFAULT_INET_TAG = tagText(InaHeader.INET_TAG);
    /** The default result tag, "NRES". */
    public static final String DEFAULT_RESULT_TAG = tagText(InaHeader.RESULT_TAG);

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
        racks = racks == null ? List.of() : List.copyOf(racks);
        inetTag = inetTag == null ? DEFAULT_INET_TAG : inetTag;
        resultTag = resultTag == null ? DEFAULT_RESULT_TAG : resultTag;
    }

    /**
     * A ring with the default tags.
     */
    public RingConfig(
        final int id,
        final ElementType elementType,
        final int window,
        final int msgLen,
        final int payloadSize,
        final int pmtu,
        final List<MemberConfig> members)
    {
        this(id, elementType, window, msgLen, payloadSize, pmtu, members, null, null, null, List.of(), null);
    }

    /**
     * A flat (single-rack) ring with the given tags.
     */
    public RingConfig(
        final int id,
        final ElementType elementType,
        final int window,
        final int msgLen,
        final int payloadSize,
        final int pmtu,
        final List<MemberConfig> members,
        final String inetTag,
        final String resultTag)
    {
        this(id, elementType, window, msgLen, payloadSize, pmtu, members, inetTag, resultTag, null, List.of(), null);
    }

    /**
     * @return whether the ring spans racks (leaf and spine appliances) rather than one appliance.
     */
    @JsonIgnore
    public boolean isMultiRack()
    {
        return !racks.isEmpty();
    }

    /**
     * The place an appliance takes in this ring (call after validation). A flat ring is installed by any appliance
     * that holds it, whatever its name, as before racks existed, unless it names its {@code appliance} (one tree of
     * a job with several): then only by the appliance of that name; a multi-rack ring only by its spine and its
     * leaves, each with its own place.
     *
     * @param applianceName this appliance's name, or null if it has none.
     * @return the hierarchy to install the ring with, or empty if this appliance has no role in the ring.
     */
    public Optional<Hierarchy> hierarchyFor(final String applianceName)
    {
        if (!isMultiRack())
        {
            return appliance == null || appliance.equals(applianceName) ? Optional.of(Hierarchy.FLAT) :
                Optional.empty();
        }
        if (applianceName == null)
        {
            return Optional.empty();
        }
        final List<Integer> rackEnds = racks.stream().map(rack -> rack.ranks().getLast()).toList();
        if (applianceName.equals(spine))
        {
            return Optional.of(Hierarchy.spine(rackEnds));
        }
        for (int k = 0; k < racks.size(); k++)
        {
            if (applianceName.equals(racks.get(k).leaf()))
            {
                return Optional.of(Hierarchy.leaf(rackEnds, k));
            }
        }
        return Optional.empty();
    }

    /**
     * @return the request tag as the 32-bit big-endian value on the wire (call after validation).
     */
    @JsonIgnore
    public int inetTagValue()
    {
        return InaHeader.tagValue(inetTag);
    }

    /**
     * @return the result tag as the 32-bit big-endian value on the wire (call after validation).
     */
    @JsonIgnore
    public int resultTagValue()
    {
        return InaHeader.tagValue(resultTag);
    }

    /**
     * @return whether {@code text} is a valid tag: exactly 4 printable ASCII characters other than space.
     */
    public static boolean isValidTag(final String text)
    {
        if (text == null || text.length() != 4)
        {
            return false;
        }
        for (int i = 0; i < 4; i++)
        {
            final char c = text.charAt(i);
            if (c <= 0x20 || c > 0x7E)
            {
                return false;
            }
        }
        return true;
    }

    private static String tagText(final int value)
    {
        return new String(new char[] {
            (char)(value >>> 24), (char)((value >>> 16) & 0xFF), (char)((value >>> 8) & 0xFF), (char)(value & 0xFF)});
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
