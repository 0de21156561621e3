package io.netreduce.dataplane.ring;

/**
 * The source MAC each rank's packets must come from: the configured one, or, trust on first use, the one the rank's
 * connection had in {@link #MAC_BINDING_SUMS} completed sums in a row. The Ethernet header is not covered by the
 * ICRC, so this is what tells a member from a host on the switch that sends with the member's address. A leaf has
 * one more entry, its entering cross-rack connection's ({@link Ring#downMacIndex()}): the spine re-emits the
 * previous rack's last rank's frames, so its results come from that member's MAC, configured or bound by
 * {@link #MAC_BINDING_SUMS} results in a row. Owned by the dataplane thread.
 */
public final class MacBinding
{
    /**
     * Completed sums in a row a rank's connection must take part in with one source MAC before that MAC is bound:
     * the Ethernet header is not covered by the ICRC, so one stray or forged frame that happens to complete a sum
     * must not lock the member out.
     */
    public static final int MAC_BINDING_SUMS = 8;

    private final long[] memberMac;
    private final long[] boundMac;
    private final long[] candidateMac;
    private final int[] candidateSums;

    /**
     * @param memberMac per rank (and a leaf's entering connection), the configured MAC or {@link RingMember#ANY_MAC}.
     */
    MacBinding(final long[] memberMac)
    {
        this.memberMac = memberMac.clone();
        this.boundMac = memberMac.clone();
        this.candidateMac = new long[memberMac.length];
        this.candidateSums = new int[memberMac.length];
    }

    public long memberMac(final int rank)
    {
        return memberMac[rank];
    }

    /**
     * @return the source MAC first packets of {@code rank} must come from: the configured one, or the one its
     *         connection had when it took part in a completed aggregation; {@link RingMember#ANY_MAC} until then.
     */
    public long boundMac(final int rank)
    {
        return boundMac[rank];
    }

    public boolean isMacBound(final int rank)
    {
        return boundMac[rank] != RingMember.ANY_MAC;
    }

    /**
     * The rank's packet in a completed aggregation came from {@code mac}: after {@link #MAC_BINDING_SUMS} such sums
     * in a row from one MAC, the rank is bound to it (trust on first use: a stranger cannot complete sums on its
     * own, so the members' own traffic names their MACs).
     */
    public void onSumFrom(final int rank, final long mac)
    {
        if (candidateMac[rank] != mac)
        {
            candidateMac[rank] = mac;
            candidateSums[rank] = 1;
        }
        else if (++candidateSums[rank] >= MAC_BINDING_SUMS)
        {
            boundMac[rank] = mac;
        }
    }
}
