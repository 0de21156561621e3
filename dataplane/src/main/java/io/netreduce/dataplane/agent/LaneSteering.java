package io.netreduce.dataplane.agent;

import io.netreduce.protocol.port.LaneSteeringProgram;

import java.util.List;

/**
 * Tells the kernel which lane receives which frames: for every installed ring, the ring's edges (source IP,
 * destination IP) to the ring's lane; frames on no ring's edge may go to any lane. Called by the control side
 * ({@link DataplaneProxy}) whenever the rings change: before a ring is installed on its lane, after it is removed.
 * Implementations: AF_PACKET fanout groups (one classifier per port, the daemon), none (memory ports, where the test
 * or benchmark feeds each lane itself).
 */
@FunctionalInterface
public interface LaneSteering
{
    /** No kernel steering: each lane's ports are fed by whoever made them. */
    LaneSteering NONE = routes -> { };

    /**
     * Make the kernel deliver each route's frames to its lane from now on.
     *
     * @throws IllegalArgumentException if the routes cannot be expressed (too many for the kernel's program limit).
     * @throws RuntimeException         if the kernel refuses (the caller leaves the ring out).
     */
    void steer(List<LaneSteeringProgram.Route> routes);
}
