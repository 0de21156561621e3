package io.netreduce.dataplane.ring;

import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.wire.InaHeader;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Everything the dataplane needs to aggregate one ring: the plain-data form the control plane sends with an
 * install command.
 *
 * @param ringId      the RingID in the INA header, 0..255.
 * @param jobName     the training job the ring belongs to (for reporting only).
 * @param elementType element type of the gradient data.
 * @param window      N, messages in flight per worker; the aggregator array holds 2N messages. 2N must divide
 *                    256 because MsgID is 8 bits and the array is indexed MsgID % 2N, so N is a power of two
 *                    from 1 to 128.
 * @param msgLen      MsgLen, packets per message, 1..255.
 * @param payloadSize RC payload bytes of every packet of a message (the first packet's payload starts with the
 *                    8-byte INA header); a multiple of 4, 16..4096. Workers pad messages to
 *                    MsgLen * payloadSize bytes.
 * @param members     one entry per rank, in any order; rank r sends to rank (r + 1) % worldSize.
 * @param inetTag     the InetTag the ring's workers put in the INA header of every message (default "NRED").
 * @param resultTag   the InetTag the appliance writes into result messages (default "NRES"): a worker that checks
 *                    for it tells a sum from a message that passed through unaggregated. Equal to
 *                    {@code inetTag} for clients that expect their own tag back: results are then not marked.
 * @param hierarchy   this appliance's place in the ring's aggregation hierarchy ({@link Hierarchy#FLAT} for a
 *                    single-rack ring). Members always list the whole ring, W ranks, with their global ranks.
 */
public record RingDefinition(
    int ringId,
    String jobName,
    ElementType elementType,
    int window,
    int msgLen,
    int payloadSize,
    List<RingMember> members,
    int inetTag,
    int resultTag,
    Hierarchy hierarchy)
{
    public static final int MAX_RANKS = 64;
    public static final int MAX_PAYLOAD = 4096;
    public static final int MIN_PAYLOAD = 16;

    public RingDefinition
    {
        Objects.requireNonNull(jobName, "jobName");
        Objects.requireNonNull(elementType, "elementType");
        members = List.copyOf(Objects.requireNonNull(members, "members"));
        Objects.requireNonNull(hierarchy, "hierarchy");
    }

    /**
     * A flat (single-rack) ring with the given tags.
     */
    public RingDefinition(
        final int ringId,
        final String jobName,
        final ElementType elementType,
        final int window,
        final int msgLen,
        final int payloadSize,
        final List<RingMember> members,
        final int inetTag,
        final int resultTag)
    {
        this(ringId, jobName, elementType, window, msgLen, payloadSize, members, inetTag, resultTag, Hierarchy.FLAT);
    }

    /**
     * @return this definition for another place in the hierarchy.
     */
    public RingDefinition withHierarchy(final Hierarchy hierarchy)
    {
        return new RingDefinition(ringId, jobName, elementType, window, msgLen, payloadSize, members, inetTag,
            resultTag, hierarchy);
    }

    /**
     * @return the ranks this appliance sums: W for a flat ring, the rack's ranks for a leaf, the racks for a spine.
     */
    public int aggregatedRanks()
    {
        return switch (hierarchy.tier())
        {
            case FLAT -> worldSize();
            case LEAF -> hierarchy.rackLast(hierarchy.rack()) - hierarchy.rackFirst(hierarchy.rack()) + 1;
            case SPINE -> hierarchy.racks();
        };
    }

    /**
     * A ring with the default tags: requests tagged {@link InaHeader#INET_TAG}, results marked
     * {@link InaHeader#RESULT_TAG}.
     */
    public RingDefinition(
        final int ringId,
        final String jobName,
        final ElementType elementType,
        final int window,
        final int msgLen,
        final int payloadSize,
        final List<RingMember> members)
    {
        this(ringId, jobName, elementType, window, msgLen, payloadSize, members, InaHeader.INET_TAG,
            InaHeader.RESULT_TAG, Hierarchy.FLAT);
    }

    /**
     * @return whether results are marked with a tag of their own (else they carry the request tag).
     */
    public boolean marksResults()
    {
        return resultTag != inetTag;
    }

    /**
     * @return the number of ranks W.
     */
    public int worldSize()
    {
        return members.size();
    }

    /**
     * @return aggregators in the ring's array: 2N x MsgLen.
     */
    public int aggregatorCount()
    {
        return 2 * window * msgLen;
    }

    /**
     * Check every field; the dataplane refuses a ring that fails.
     *
     * @throws IllegalArgumentException naming the first field that is wrong and why.
     */
    public void validate()
    {
        if (ringId < 0 || ringId > 255)
        {
            throw new IllegalArgumentException("ringId " + ringId + " is not in 0..255 (8-bit RingID)");
        }
        if (window < 1 || window > 128 || Integer.bitCount(window) != 1)
        {
            throw new IllegalArgumentException("ring " + ringId + ": window " + window +
                " must be a power of two in 1..128 (MsgID is 8 bits, so 2N must divide 256)");
        }
        if (msgLen < 1 || msgLen > 255)
        {
            throw new IllegalArgumentException("ring " + ringId + ": msgLen " + msgLen + " is not in 1..255");
        }
        if (payloadSize < MIN_PAYLOAD || payloadSize > MAX_PAYLOAD || (payloadSize & 3) != 0)
        {
            throw new IllegalArgumentException("ring " + ringId + ": payloadSize " + payloadSize +
                " must be a multiple of 4 in " + MIN_PAYLOAD + ".." + MAX_PAYLOAD);
        }
        final int worldSize = members.size();
        if (worldSize < 2 || worldSize > MAX_RANKS)
        {
            throw new IllegalArgumentException("ring " + ringId + ": " + worldSize + " members, need 2.." + MAX_RANKS);
        }
        final boolean[] seen = new boolean[worldSize];
        for (final RingMember member : members)
        {
            if (member.rank() < 0 || member.rank() >= worldSize || seen[member.rank()])
            {
                throw new IllegalArgumentException("ring " + ringId + ": ranks must be 0.." + (worldSize - 1) +
                    " each exactly once, got rank " + member.rank());
            }
            seen[member.rank()] = true;
        }
        final int family = members.getFirst().address().getAddress().length;
        for (final RingMember member : members)
        {
            if (member.address().getAddress().length != family)
            {
                throw new IllegalArgumentException("ring " + ringId + ": members mix IPv4 and IPv6 addresses");
            }
        }
        hierarchy.validate(ringId, worldSize);
        if (hierarchy.tier() != Hierarchy.Tier.FLAT &&
            (inetTag == Hierarchy.PARTIAL_TAG || resultTag == Hierarchy.PARTIAL_TAG))
        {
            throw new IllegalArgumentException("ring " + ringId + ": the tag NRPT marks a leaf's partial sums; " +
                "a multi-rack ring's inetTag and resultTag must differ from it");
        }
        if (hierarchy.tier() == Hierarchy.Tier.LEAF && !marksResults())
        {
            // A leaf tells the spine's result (arriving on its entering cross-rack connection) from a raw gradient
            // on that connection by the result tag.
            throw new IllegalArgumentException("ring " + ringId + ": a leaf ring needs a resultTag other than its " +
                "inetTag");
        }
    }

    /**
     * @return the member with the given rank.
     */
    public RingMember member(final int rank)
    {
        for (final RingMember member : members)
        {
            if (member.rank() == rank)
            {
                return member;
            }
        }
        throw new IllegalArgumentException("no rank " + rank + " in ring " + ringId);
    }

    /**
     * @return the ring's edges, rank r's address to rank r + 1's (mod W), for every rank of the whole ring: the
     *         (source IP, destination IP) of every connection of the ring, whichever tier this appliance is.
     */
    public List<InetAddress[]> edges()
    {
        final int world = worldSize();
        final List<InetAddress[]> edges = new ArrayList<>(world);
        for (int rank = 0; rank < world; rank++)
        {
            edges.add(new InetAddress[]{ member(rank).address(), member((rank + 1) % world).address() });
        }
        return edges;
    }
}
