package io.netreduce.dataplane.agent;

import io.netreduce.protocol.port.PacketPort;

import java.util.ArrayList;
import java.util.List;

/**
 * The dataplane as N lanes: N {@link DataplaneAgent}s, each run on its own thread, each the single writer of a
 * disjoint set of rings with their CLT entries, edges, aggregator memory and counters, each polling its own ports.
 * Lane i's ports are its own sockets on the configured interfaces (members i of AF_PACKET fanout groups), and the
 * kernel hands each frame to one lane only ({@link LaneSteering}): no dispatcher thread, no frame copied between
 * lanes, nothing shared on the per-packet path. Traffic on no ring's edge (pass-through) is handled by whichever
 * lane the kernel gives it to.
 * <p>
 * The control side talks to all lanes through one {@link DataplaneProxy}: it places each ring on a lane, steers the
 * ring's edges there and installs it on that lane's agent.
 */
public final class DataplaneLanes
{
    private final List<DataplaneAgent> agents;
    private final DataplaneProxy proxy;

    /**
     * @param context   settings shared by every lane (its ports are ignored: each lane has its own).
     * @param lanePorts for each lane, its ports, in the same order (port i of every lane is the same interface).
     * @param steering  how the kernel is told which lane gets which ring's frames.
     */
    public DataplaneLanes(
        final DataplaneContext context, final List<List<PacketPort>> lanePorts, final LaneSteering steering)
    {
        if (lanePorts.isEmpty())
        {
            throw new IllegalArgumentException("at least one lane is needed");
        }
        final List<DataplaneAgent> agents = new ArrayList<>(lanePorts.size());
        final List<LaneHandle> handles = new ArrayList<>(lanePorts.size());
        for (int lane = 0; lane < lanePorts.size(); lane++)
        {
            if (lanePorts.get(lane).size() != lanePorts.getFirst().size())
            {
                throw new IllegalArgumentException("lane " + lane + " has " + lanePorts.get(lane).size() +
                    " ports, lane 0 has " + lanePorts.getFirst().size());
            }
            final DataplaneAgent agent = new DataplaneAgent(context.forLane(lane, lanePorts.get(lane)));
            agents.add(agent);
            handles.add(agent.handle());
        }
        this.agents = List.copyOf(agents);
        this.proxy = new DataplaneProxy(handles, context.memoryBudget(), steering);
    }

    /**
     * @return the agents, by lane; run each on its own thread.
     */
    public List<DataplaneAgent> agents()
    {
        return agents;
    }

    public DataplaneAgent agent(final int lane)
    {
        return agents.get(lane);
    }

    /**
     * @return the control plane's handle on every lane (thread-safe).
     */
    public DataplaneProxy proxy()
    {
        return proxy;
    }
}
