package io.netreduce.daemon;

import io.netreduce.controlplane.api.RingInstaller;
import io.netreduce.controlplane.config.MemberConfig;
import io.netreduce.controlplane.config.RingConfig;
import io.netreduce.controlplane.config.RingRef;
import io.netreduce.controlplane.config.SwitchMlJobConfig;
import io.netreduce.dataplane.agent.RingInstalled;
import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.protocol.wire.EthernetHeader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import static io.netreduce.daemon.CommandReplies.await;

/**
 * Where validated ring changes go: each becomes an install or remove command on the owning lane's bounded queue,
 * translated from the configuration with this appliance's place in the ring. Keeps the rings installed, for the
 * metrics' labels, the CTT view and the foreign-tag reporter.
 */
final class DataplaneRingInstaller implements RingInstaller
{
    /** The dataplane's one logger, as before its parts had classes of their own: operators grep its name. */
    private static final Logger LOG = LoggerFactory.getLogger(PacketDataplane.class);

    private final LaneRunners lanes;
    private final DataplaneSwitchMl switchMl;
    private final Map<Integer, String> ringJobs = new ConcurrentHashMap<>();
    /** The rings installed, for the reporter's messages (written by the control thread, read by the reporter). */
    private final Map<Integer, RingDefinition> installedRings = new ConcurrentHashMap<>();
    /** This appliance's name: its role (leaf of a rack, spine) in every multi-rack ring. */
    private volatile String applianceName;

    DataplaneRingInstaller(final LaneRunners lanes, final DataplaneSwitchMl switchMl)
    {
        this.lanes = lanes;
        this.switchMl = switchMl;
    }

    /**
     * @param name this appliance's name (appliance.name or --name), or null.
     */
    void applianceName(final String name)
    {
        applianceName = name;
    }

    String applianceName()
    {
        return applianceName;
    }

    @Override
    public void install(final RingRef ring)
    {
        final RingDefinition config = toDataplane(ring, applianceName);
        final RingInstalled installed =
            await(lanes.proxy().installRing(config), "install ring " + config.ringId());
        ringJobs.put(config.ringId(), ring.job());
        installedRings.put(config.ringId(), config);
        LOG.info("ring {} of job {} installed{}: {} ranks, {} aggregators, {} bytes (budget used {} of {})",
            installed.ringId(), ring.job(), describeRole(config), config.worldSize(),
            installed.aggregators(), installed.memoryBytes(), installed.budgetUsedBytes(),
            installed.budgetBytes());
        warnIfWindowsOutgrowTheReceiveRing();
    }

    /**
     * PANAMA's {@code wnd_cap} is a job's share of the aggregator's buffer. Here a ring's window is its cap whatever
     * else shares the port, so say when the windows of every ring together could put more frames in flight than a
     * port's receive ring holds: the appliance then marks ECN at {@code dataplane.ecnBacklog} (workers with the ECN
     * window slow down), and drops (ranks resend by go-back-N) if it fills. An estimate: every rank of every ring a
     * full window of MsgLen packets ahead, all on one lane.
     */
    private void warnIfWindowsOutgrowTheReceiveRing()
    {
        long inFlight = 0;
        for (final RingDefinition ring : installedRings.values())
        {
            inFlight += (long)ring.worldSize() * ring.window() * ring.msgLen();
        }
        final int capacity = lanes.smallestReceiveCapacity();
        if (capacity > 0 && inFlight > capacity)
        {
            LOG.warn("the {} rings installed can have {} frames in flight, more than a port's receive ring holds " +
                "({}): a lane that falls behind marks ECN from dataplane.ecnBacklog of it, and drops when it is " +
                "full; smaller windows, or a larger ring, keep it in", installedRings.size(), inFlight, capacity);
        }
    }

    @Override
    public void remove(final RingRef ring)
    {
        await(lanes.proxy().removeRing(ring.ring().id()), "remove ring " + ring.ring().id());
        ringJobs.remove(ring.ring().id());
        installedRings.remove(ring.ring().id());
        LOG.info("ring {} of job {} removed: its traffic now passes through", ring.ring().id(), ring.job());
    }

    @Override
    public void installSwitchMl(final String job, final SwitchMlJobConfig switchml)
    {
        switchMl.installConfigured(job, switchml);
    }

    @Override
    public void removeSwitchMl(final String job)
    {
        switchMl.remove(job);
    }

    /**
     * @return the job of ring {@code ringId}, or "" if no such ring is installed.
     */
    String jobOf(final int ringId)
    {
        return ringJobs.getOrDefault(ringId, "");
    }

    /**
     * @return the rings installed on the dataplane, as sent: a live view.
     */
    Collection<RingDefinition> installed()
    {
        return installedRings.values();
    }

    private static String describeRole(final RingDefinition ring)
    {
        final Hierarchy hierarchy = ring.hierarchy();
        return switch (hierarchy.tier())
        {
            case FLAT -> "";
            case LEAF -> " as the leaf of rack " + hierarchy.rack() + " (ranks " +
                hierarchy.rackFirst(hierarchy.rack()) + ".." + hierarchy.rackLast(hierarchy.rack()) + ")";
            case SPINE -> " as the spine of " + hierarchy.racks() + " racks (rack ends " + hierarchy.rackEnds() + ")";
        };
    }

    /**
     * Translate a validated ring of the configuration into the dataplane's install command, with this appliance's
     * place in it: the same ring (all W members, same RingID) for every appliance of a multi-rack job, the
     * hierarchy picked by the appliance's name.
     *
     * @throws IllegalArgumentException if the appliance has no role in the ring (the configured appliance
     *                                  leaves such rings out, so this is a bug, not a configuration error).
     */
    static RingDefinition toDataplane(final RingRef ref, final String applianceName)
    {
        final Hierarchy hierarchy = ref.ring().hierarchyFor(applianceName).orElseThrow(() ->
            new IllegalArgumentException("ring " + ref.ring().id() + " of job " + ref.job() + ": appliance " +
                applianceName + " is neither its spine nor one of its leaves"));
        return flatDefinition(ref).withHierarchy(hierarchy);
    }

    private static RingDefinition flatDefinition(final RingRef ref)
    {
        final RingConfig ring = ref.ring();
        final List<RingMember> members = new ArrayList<>();
        for (final MemberConfig member : ring.members())
        {
            members.add(new RingMember(
                member.rank(),
                InetAddress.ofLiteral(member.ip()),
                member.qpn() == null ? RingMember.ANY : member.qpn(),
                member.mac() == null ? RingMember.ANY_MAC : EthernetHeader.parseMac(member.mac())));
        }
        return new RingDefinition(ring.id(), ref.job(), ring.elementType(), ring.window(),
            ring.msgLen(), ring.payloadSize(), members, ring.inetTagValue(), ring.resultTagValue());
    }
}
