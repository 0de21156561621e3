package io.netreduce.dataplane.ring;

import java.util.List;
import java.util.Objects;

/**
 * Where an appliance sits in a ring's aggregation hierarchy (paper 000, §3.3).
 * <p>
 * A multi-rack ring is cut into racks of consecutive ranks in ring order: rack 0 holds ranks 0..e0, rack 1 holds
 * e0+1..e1, ..., the last rack ends at W-1 ({@code rackEnds} lists e0, e1, ...). Every rack then has exactly one
 * connection leaving it (its last rank to the next rack's first rank) and one entering it: the cross-rack
 * connections. They are the virtual switch-to-switch connections: a leaf sends its rack's partial sum up on its
 * leaving cross-rack connection (that connection's own headers and PSNs, one packet per position), the spine sums
 * the leaves' partials and sends the result down on every cross-rack connection, and each leaf translates the
 * result arriving on its entering connection onto its rack's other connections.
 *
 * @param tier     {@link Tier#FLAT} (one appliance for the whole ring), {@link Tier#LEAF} or {@link Tier#SPINE}.
 * @param rackEnds the last rank of each rack, strictly increasing, the last being W-1 (empty for FLAT).
 * @param rack     for a LEAF, the rack it serves (index into {@code rackEnds}); -1 otherwise.
 */
public record Hierarchy(Tier tier, List<Integer> rackEnds, int rack)
{
    /** What an appliance does for a ring. */
    public enum Tier
    {
        /** Sums every rank and answers every connection (single rack). */
        FLAT,
        /** Sums its rack's ranks, sends the partial up, translates the spine's result onto its rack. */
        LEAF,
        /** Sums the leaves' partials (the leaves are its ranks) and sends the result down to every leaf. */
        SPINE
    }

    public static final Hierarchy FLAT = new Hierarchy(Tier.FLAT, List.of(), -1);

    /**
     * The InetTag a leaf writes into the partial sums it sends up ("NRPT"), and the only request tag a spine
     * aggregates. A worker's own message that reaches the spine past its leaf (the leaf bypassed or its redirect
     * removed) carries the worker's tag instead: the spine passes it on unaggregated, and the receiving worker,
     * finding a request tag where it expects the result tag, fails instead of taking one rank's gradient for its
     * rack's sum.
     */
    public static final int PARTIAL_TAG = 0x4E525054;

    public Hierarchy
    {
        Objects.requireNonNull(tier, "tier");
        rackEnds = List.copyOf(Objects.requireNonNull(rackEnds, "rackEnds"));
    }

    public static Hierarchy leaf(final List<Integer> rackEnds, final int rack)
    {
        return new Hierarchy(Tier.LEAF, rackEnds, rack);
    }

    public static Hierarchy spine(final List<Integer> rackEnds)
    {
        return new Hierarchy(Tier.SPINE, rackEnds, -1);
    }

    public int racks()
    {
        return rackEnds.size();
    }

    public int rackFirst(final int rack)
    {
        return rack == 0 ? 0 : rackEnds.get(rack - 1) + 1;
    }

    public int rackLast(final int rack)
    {
        return rackEnds.get(rack);
    }

    /**
     * @return the rack holding {@code rank}.
     */
    public int rackOf(final int rank)
    {
        for (int k = 0; k < rackEnds.size(); k++)
        {
            if (rank <= rackEnds.get(k))
            {
                return k;
            }
        }
        throw new IllegalArgumentException("rank " + rank + " is in no rack");
    }

    /**
     * Check the racks against the ring's world size.
     *
     * @throws IllegalArgumentException naming what is wrong.
     */
    void validate(final int ringId, final int worldSize)
    {
        if (tier == Tier.FLAT)
        {
            if (!rackEnds.isEmpty() || rack != -1)
            {
                throw new IllegalArgumentException("ring " + ringId + ": a flat ring has no racks");
            }
            return;
        }
        if (rackEnds.size() < 2)
        {
            throw new IllegalArgumentException("ring " + ringId + ": a " + tier.name().toLowerCase() +
                " ring needs at least 2 racks, got " + rackEnds.size());
        }
        int previous = -1;
        for (final int end : rackEnds)
        {
            if (end <= previous)
            {
                throw new IllegalArgumentException("ring " + ringId + ": rack ends " + rackEnds +
                    " must be strictly increasing (every rack holds at least one rank)");
            }
            previous = end;
        }
        if (previous != worldSize - 1)
        {
            throw new IllegalArgumentException("ring " + ringId + ": the last rack must end at rank " +
                (worldSize - 1) + " (W - 1), got " + previous);
        }
        if (tier == Tier.LEAF && (rack < 0 || rack >= rackEnds.size()))
        {
            throw new IllegalArgumentException("ring " + ringId + ": leaf rack " + rack + " is not in 0.." +
                (rackEnds.size() - 1));
        }
        if (tier == Tier.SPINE && rack != -1)
        {
            throw new IllegalArgumentException("ring " + ringId + ": a spine serves no single rack");
        }
    }
}
