package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.protocol.port.LaneSteeringProgram;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Which lane owns which ring (control side; the {@link DataplaneProxy} guards it with its lock).
 * <p>
 * A lane is the single writer of its rings, its CLT and its ring edges, and the kernel steers frames to lanes by
 * their (source IP, destination IP): so rings that share an edge (two jobs on the same pair of hosts) must share a
 * lane, or one edge's frames would reach a lane that does not know half their connections. A new ring goes to the
 * lane of the rings it shares edges with; otherwise to the lane with the fewest rings (then the least aggregator
 * memory). A ring sharing edges with rings of two different lanes is refused: moving a running ring between
 * lanes would lose its in-flight aggregators.
 * <p>
 * The memory budget is the whole dataplane's: checked here over every lane's rings.
 */
final class LaneAssignment
{
    private record Placement(RingDefinition config, int lane, long bytes, List<Edge> edges)
    {
    }

    private record Edge(InetAddress source, InetAddress destination)
    {
    }

    private final int lanes;
    private final long memoryBudget;
    private final Map<Integer, Placement> rings = new LinkedHashMap<>();
    private long memoryUsed;

    LaneAssignment(final int lanes, final long memoryBudget)
    {
        this.lanes = lanes;
        this.memoryBudget = memoryBudget;
    }

    int lanes()
    {
        return lanes;
    }

    long memoryUsed()
    {
        return memoryUsed;
    }

    /**
     * @return the lane that owns the ring, or -1 if none does.
     */
    int laneOf(final int ringId)
    {
        final Placement placement = rings.get(ringId);
        return placement == null ? -1 : placement.lane();
    }

    /**
     * Place a ring (validated) on a lane and count its memory.
     *
     * @param requestedLane the lane to use, or -1 to choose.
     * @return the lane.
     * @throws IllegalArgumentException if the ring is placed already, does not fit the budget, cannot go on the
     *                                  requested lane, or shares edges with rings of two lanes.
     */
    int place(final RingDefinition config, final int requestedLane)
    {
        final Placement existing = rings.get(config.ringId());
        if (existing != null)
        {
            throw DataplaneTables.alreadyInstalled(config.ringId(), existing.config().jobName());
        }
        if (requestedLane < -1 || requestedLane >= lanes)
        {
            throw new IllegalArgumentException("lane " + requestedLane + " does not exist (" + lanes + " lanes)");
        }
        final long bytes = DataplaneTables.requireFits(config, memoryUsed, memoryBudget);
        final List<Edge> edges = new ArrayList<>();
        for (final InetAddress[] pair : config.edges())
        {
            edges.add(new Edge(pair[0], pair[1]));
        }
        final TreeSet<Integer> sharing = new TreeSet<>();
        for (final Placement other : rings.values())
        {
            for (final Edge edge : edges)
            {
                if (other.edges().contains(edge))
                {
                    sharing.add(other.lane());
                }
            }
        }
        final int lane;
        if (sharing.size() > 1)
        {
            throw new IllegalArgumentException("ring " + config.ringId() + " shares worker pairs with rings on lanes " +
                sharing + "; rings sharing a worker pair must share a lane: install it with fewer lanes, or remove " +
                "and re-install the rings it shares pairs with");
        }
        else if (sharing.size() == 1)
        {
            lane = sharing.first();
            if (requestedLane >= 0 && requestedLane != lane)
            {
                throw new IllegalArgumentException("ring " + config.ringId() + " shares worker pairs with rings on " +
                    "lane " + lane + ", so it cannot go on lane " + requestedLane);
            }
        }
        else
        {
            lane = requestedLane >= 0 ? requestedLane : leastLoaded();
        }
        rings.put(config.ringId(), new Placement(config, lane, bytes, edges));
        memoryUsed += bytes;
        return lane;
    }

    /**
     * Forget a ring's placement (removed, or its install failed).
     */
    void release(final int ringId)
    {
        final Placement placement = rings.remove(ringId);
        if (placement == null)
        {
            return;
        }
        memoryUsed -= placement.bytes();
    }

    /**
     * @return one route per edge of every placed ring, to the ring's lane.
     */
    List<LaneSteeringProgram.Route> routes()
    {
        final Map<Edge, Integer> laneOfEdge = new LinkedHashMap<>();
        for (final Placement placement : rings.values())
        {
            for (final Edge edge : placement.edges())
            {
                laneOfEdge.putIfAbsent(edge, placement.lane());
            }
        }
        final List<LaneSteeringProgram.Route> routes = new ArrayList<>(laneOfEdge.size());
        // A placed ring is validated: its members are all IPv4 or all IPv6, as a route must be.
        laneOfEdge.forEach((edge, lane) ->
            routes.add(new LaneSteeringProgram.Route(edge.source(), edge.destination(), lane)));
        return routes;
    }

    private int leastLoaded()
    {
        final int[] count = new int[lanes];
        final long[] bytes = new long[lanes];
        for (final Placement placement : rings.values())
        {
            count[placement.lane()]++;
            bytes[placement.lane()] += placement.bytes();
        }
        int best = 0;
        for (int lane = 1; lane < lanes; lane++)
        {
            if (count[lane] < count[best] || (count[lane] == count[best] && bytes[lane] < bytes[best]))
            {
                best = lane;
            }
        }
        return best;
    }
}
