package io.netreduce.controlplane.config;

import io.netreduce.protocol.element.ElementType;

import java.net.InetAddress;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeSet;

import static io.netreduce.controlplane.config.ConfigRules.isRingIdValid;
import static io.netreduce.controlplane.config.ConfigRules.range;
import static io.netreduce.controlplane.config.ErrorCollector.child;
import static io.netreduce.controlplane.config.ErrorCollector.index;

/**
 * Checks of one ring: its id, window, MsgLen, PMTU, payload size and tags, its members (ranks, addresses, MACs,
 * QPNs) and, through {@link HierarchyValidator}, its racks and spine.
 */
final class RingValidator
{
    private final ErrorCollector errors;
    private final HierarchyValidator hierarchy;

    RingValidator(final ErrorCollector errors)
    {
        this.errors = errors;
        hierarchy = new HierarchyValidator(errors);
    }

    void check(final RingConfig ring, final String path)
    {
        if (!isRingIdValid(ring.id()))
        {
            errors.add(child(path, "id"), "ring id " + ring.id() + " is not in 0.." + RingConfig.MAX_ID);
        }
        final String windowPath = child(path, "window");
        if (ring.window() < 1 || ring.window() > RingConfig.MAX_WINDOW || Integer.bitCount(ring.window()) != 1)
        {
            errors.add(windowPath, "window " + ring.window() + " is not a power of two in 1.." +
                RingConfig.MAX_WINDOW + " (MsgID is 8 bits and the aggregator index is MsgID % 2N)");
        }
        range(errors, ring.msgLen(), 1, RingConfig.MAX_MSG_LEN, child(path, "msgLen"));
        final String pmtuPath = child(path, "pmtu");
        final boolean pmtuValid = RingConfig.PMTUS.contains(ring.pmtu());
        if (!pmtuValid)
        {
            errors.add(pmtuPath, "PMTU " + ring.pmtu() + " is not one of " + RingConfig.PMTUS);
        }
        final String payloadPath = child(path, "payloadSize");
        final ElementType type = ring.elementType();
        if (ring.payloadSize() < 1)
        {
            errors.add(payloadPath, "payload size " + ring.payloadSize() + " must be at least 1");
        }
        else if (type != null && ring.payloadSize() % type.size() != 0)
        {
            errors.add(payloadPath, "payload size " + ring.payloadSize() + " is not a multiple of the " +
                type.cliName() + " element size " + type.size());
        }
        else if (pmtuValid && ring.payloadSize() > ring.pmtu())
        {
            errors.add(payloadPath, "payload size " + ring.payloadSize() + " exceeds the PMTU " + ring.pmtu());
        }
        for (final String key : new String[] {"inetTag", "resultTag"})
        {
            final String tag = "inetTag".equals(key) ? ring.inetTag() : ring.resultTag();
            if (!RingConfig.isValidTag(tag))
            {
                errors.add(child(path, key), "'" + tag + "' is not 4 printable ASCII characters (the InetTag is " +
                    "4 bytes, e.g. NRED)");
            }
        }
        checkMembers(ring.members(), child(path, "members"));
        hierarchy.check(ring, path);
    }

    private void checkMembers(final List<MemberConfig> members, final String path)
    {
        final int worldSize = members.size();
        if (worldSize < RingConfig.MIN_WORLD_SIZE || worldSize > RingConfig.MAX_WORLD_SIZE)
        {
            errors.add(path, "world size " + worldSize + " is not in " + RingConfig.MIN_WORLD_SIZE + ".." +
                RingConfig.MAX_WORLD_SIZE);
        }
        final Map<Integer, String> ranks = new HashMap<>();
        final Map<InetAddress, String> addresses = new HashMap<>();
        for (int m = 0; m < worldSize; m++)
        {
            final MemberConfig member = members.get(m);
            final String memberPath = index(path, m);
            final String rankPath = child(memberPath, "rank");
            if (member.rank() < 0 || member.rank() >= worldSize)
            {
                errors.add(rankPath, "rank " + member.rank() + " is not in 0.." + (worldSize - 1) +
                    " (ranks are 0..worldSize-1)");
            }
            else
            {
                final String previous = ranks.putIfAbsent(member.rank(), rankPath);
                if (previous != null)
                {
                    errors.add(rankPath, "duplicate rank " + member.rank() + " (also " + previous + ")");
                }
            }

            final String ipPath = child(memberPath, "ip");
            if (member.ip() != null)
            {
                final InetAddress address = member.address();
                if (address == null)
                {
                    errors.add(ipPath, "not an IPv4 or IPv6 address");
                }
                else
                {
                    final String previous = addresses.putIfAbsent(address, ipPath);
                    if (previous != null)
                    {
                        errors.add(ipPath, "duplicate member address " + member.ip() + " (also " + previous + ")");
                    }
                }
            }
            if (member.mac() != null && !Addresses.isMac(member.mac()))
            {
                errors.add(child(memberPath, "mac"), "'" + member.mac() +
                    "' is not a MAC address like 02:00:00:00:00:01");
            }
            if (member.qpn() != null && (member.qpn() < 0 || member.qpn() > MemberConfig.MAX_QPN))
            {
                errors.add(child(memberPath, "qpn"), "QPN " + member.qpn() + " is not in 0..0xffffff (24 bits)");
            }
        }
        if (worldSize >= RingConfig.MIN_WORLD_SIZE && ranks.size() < worldSize)
        {
            final TreeSet<Integer> missing = new TreeSet<>();
            for (int rank = 0; rank < worldSize; rank++)
            {
                if (!ranks.containsKey(rank))
                {
                    missing.add(rank);
                }
            }
            errors.add(path, "ranks must be exactly 0.." + (worldSize - 1) + "; missing " + missing);
        }
        final long families = members.stream().map(MemberConfig::address).filter(Objects::nonNull)
            .map(address -> address.getAddress().length).distinct().count();
        if (families > 1)
        {
            errors.add(path, "members mix IPv4 and IPv6 addresses: a ring's connections are all one family");
        }
    }
}
