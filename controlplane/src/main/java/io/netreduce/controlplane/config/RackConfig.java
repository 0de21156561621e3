package io.netreduce.controlplane.config;

import java.util.List;

/**
 * One rack of a multi-rack ring (paper §3.3): the leaf appliance beside the rack's switch and the ranks it
 * aggregates. Racks hold consecutive ranks in ring order, rack 0 beginning at rank 0, so that each rack has exactly
 * one connection leaving it and one entering it (the virtual switch-to-switch connections).
 *
 * @param leaf  the name of the leaf appliance ({@code appliance.name} or {@code --name} of its daemon).
 * @param ranks the rack's ranks, consecutive and increasing; they index the ring's {@code members}.
 */
public record RackConfig(String leaf, List<Integer> ranks)
{
    /**
     * Canonical constructor: copies the rank list so the record is immutable.
     */
    public RackConfig
    {
        ranks = List.copyOf(ranks);
    }
}
