package io.netreduce.dataplane.ring;

import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.wire.InaHeader;
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
    int resultTag)
{
    public static final int MAX_RANKS = 64;
    public static final int MAX_PAYLOAD = 4096;
    public static final int MIN_PAYLOAD = 16;

    public RingDefinition
    {
        Objects.requireNonNull(jobName, "jobName");
        Objects.requireNonNull(elementType, "elementType");
        members = List.copyOf(Objects.requireNonNull(members, "members"));
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
            InaHeader.RESULT_TAG);
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
}
