package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.RingConfig;
import io.netreduce.dataplane.ring.Hierarchy;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One Connection Translation Table entry of a multi-rack ring (paper §3.3, Table 3), as this appliance holds it.
 * The virtual switch-to-switch connections are the ring's cross-rack worker connections (last rank of a rack to
 * the next rack's first rank), so an entry names one of them, the connections whose packets trigger it and the
 * connections its packets leave on:
 * <ul>
 * <li>leaf, role {@code up}: the rack's connections a &rarr; a+1 .. b &rarr; b+1 are summed into the partial that
 * leaves on b &rarr; b+1 (known at install: b's headers come from b's own packets, as for any ring connection);</li>
 * <li>leaf, role {@code down}: the spine's result arriving on the entering connection a&minus;1 &rarr; a leaves on
 * a &rarr; a+1 .. b&minus;1 &rarr; b and on a&minus;1 &rarr; a itself (populated from that connection's first
 * packet: the CLT entry of kind DOWN);</li>
 * <li>spine, role {@code rack}: leaf k's partial on b_k &rarr; b_k+1 is summed into the result that leaves on every
 * rack's connection b_j &rarr; b_j+1 (pre-computed at install).</li>
 * </ul>
 *
 * @param ringId      the ring.
 * @param job         its job.
 * @param tier        {@code leaf} or {@code spine}.
 * @param rack        for a leaf, the rack it serves; for the spine, the rack whose leaving connection the entry is.
 * @param role        {@code up}, {@code down} or {@code rack}, see above.
 * @param populated   {@code install} (known from the topology at install) or {@code first-packet}.
 * @param connection  the virtual switch-to-switch connection the entry is about.
 * @param learned     whether the dataplane's CLT holds that connection yet (its QPN, MsgID and PSN below).
 * @param dstQpn      its destination QP as learned, or -1.
 * @param msgId       the newest MsgID started on it, or -1.
 * @param psn0        the PSN of that message's first packet, or -1.
 * @param triggers    the connections whose packets the entry translates.
 * @param leaves      the connections the translated packets leave on.
 */
public record CttEntry(
    int ringId,
    String job,
    String tier,
    int rack,
    String role,
    String populated,
    Connection connection,
    boolean learned,
    int dstQpn,
    int msgId,
    long psn0,
    List<Connection> triggers,
    List<Connection> leaves)
{
    /**
     * A ring connection: rank r's RC connection to rank r + 1 (mod W).
     *
     * @param rank  the sending rank.
     * @param srcIp rank r's address.
     * @param dstIp rank r + 1's address.
     */
    public record Connection(int rank, String srcIp, String dstIp)
    {
    }

    /**
     * The entries an appliance holds for the rings it has installed.
     *
     * @param rings         the rings installed, with their jobs.
     * @param applianceName this appliance's name (picks its role in each multi-rack ring).
     * @param clt           the current ring connections of the CLT (stale and foreign entries left out).
     * @return one entry per virtual connection this appliance translates, rings in the order given.
     */
    public static List<CttEntry> of(final List<RingStatus> rings, final String applianceName,
        final List<CltEntry> clt)
    {
        final Map<Long, CltEntry> learned = new HashMap<>();
        for (final CltEntry entry : clt)
        {
            learned.put(key(entry.ringId(), entry.rank()), entry);
        }
        final List<CttEntry> entries = new ArrayList<>();
        for (final RingStatus status : rings)
        {
            final RingConfig ring = status.ring();
            final Hierarchy hierarchy = ring.hierarchyFor(applianceName).orElse(Hierarchy.FLAT);
            switch (hierarchy.tier())
            {
                case FLAT ->
                {
                }
                case LEAF ->
                {
                    final int k = hierarchy.rack();
                    final int first = hierarchy.rackFirst(k);
                    final int last = hierarchy.rackLast(k);
                    final int entering = (first - 1 + ring.worldSize()) % ring.worldSize();
                    entries.add(entry(status, "leaf", k, "up", "install", connection(ring, last), learned,
                        connections(ring, first, last), List.of(connection(ring, last))));
                    final List<Connection> down = new ArrayList<>(connections(ring, first, last - 1));
                    down.add(connection(ring, entering));
                    // The entering connection's rank is outside the rack: on a leaf only its DOWN entry carries it.
                    entries.add(entry(status, "leaf", k, "down", "first-packet",
                        connection(ring, entering), learned, List.of(connection(ring, entering)), down));
                }
                case SPINE ->
                {
                    final List<Connection> all = new ArrayList<>();
                    for (int k = 0; k < hierarchy.racks(); k++)
                    {
                        all.add(connection(ring, hierarchy.rackLast(k)));
                    }
                    for (int k = 0; k < hierarchy.racks(); k++)
                    {
                        entries.add(entry(status, "spine", k, "rack", "install", all.get(k), learned,
                            List.of(all.get(k)), all));
                    }
                }
            }
        }
        return entries;
    }

    private static CttEntry entry(final RingStatus status, final String tier, final int rack, final String role,
        final String populated, final Connection connection, final Map<Long, CltEntry> learned,
        final List<Connection> triggers, final List<Connection> leaves)
    {
        final CltEntry clt = learned.get(key(status.ring().id(), connection.rank()));
        return new CttEntry(status.ring().id(), status.job(), tier, rack, role, populated, connection, clt != null,
            clt == null ? -1 : clt.dstQpn(), clt == null ? -1 : clt.msgId(), clt == null ? -1 : clt.psn0(),
            triggers, leaves);
    }

    private static List<Connection> connections(final RingConfig ring, final int first, final int last)
    {
        final List<Connection> list = new ArrayList<>();
        for (int rank = first; rank <= last; rank++)
        {
            list.add(connection(ring, rank));
        }
        return list;
    }

    private static Connection connection(final RingConfig ring, final int rank)
    {
        return new Connection(rank, ip(ring, rank), ip(ring, (rank + 1) % ring.worldSize()));
    }

    private static String ip(final RingConfig ring, final int rank)
    {
        return ring.members().stream().filter(member -> member.rank() == rank).findFirst().orElseThrow().ip();
    }

    private static long key(final int ringId, final int rank)
    {
        return ((long)ringId << 32) | (rank & 0xFFFF_FFFFL);
    }
}
