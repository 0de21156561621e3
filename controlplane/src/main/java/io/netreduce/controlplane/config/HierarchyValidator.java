package io.netreduce.controlplane.config;

import io.netreduce.dataplane.ring.Hierarchy;

import java.util.HashMap;
import java.util.Map;

import static io.netreduce.controlplane.config.ConfigRules.NAME_RULE;
import static io.netreduce.controlplane.config.ConfigRules.isName;
import static io.netreduce.controlplane.config.ErrorCollector.child;
import static io.netreduce.controlplane.config.ErrorCollector.index;

/**
 * Checks of a ring's place in a hierarchy: its racks, their leaves and ranks, its spine, and the tags a multi-rack
 * ring needs; or, for one tree of a job with several, the appliance it names.
 */
final class HierarchyValidator
{
    private final ErrorCollector errors;

    HierarchyValidator(final ErrorCollector errors)
    {
        this.errors = errors;
    }

    /**
     * A multi-rack ring (paper §3.3): a spine and at least two racks, each with its own leaf, holding consecutive
     * ranks in ring order from rank 0 to W-1, so that every rack has exactly one connection leaving it and one
     * entering it (the virtual switch-to-switch connections the dataplane needs). The element type, window, MsgLen,
     * payload size and tags are the ring's own, so every appliance of the ring aggregates with the same ones.
     */
    void check(final RingConfig ring, final String path)
    {
        final String racksPath = child(path, "racks");
        final String spinePath = child(path, "spine");
        if (ring.appliance() != null)
        {
            // One tree of a job with several (PANAMA §4.1): a flat ring aggregated by the named appliance only.
            final String appliancePath = child(path, "appliance");
            if (!isName(ring.appliance()))
            {
                errors.add(appliancePath, "appliance name '" + ring.appliance() + "' " + NAME_RULE);
            }
            if (!ring.racks().isEmpty() || ring.spine() != null)
            {
                errors.add(appliancePath, "a ring that names its appliance is flat (one tree through that " +
                    "appliance): remove racks and spine, or the appliance");
            }
            return;
        }
        if (ring.racks().isEmpty())
        {
            if (ring.spine() != null)
            {
                errors.add(racksPath, "a ring with a spine needs its racks (each with its leaf and ranks); " +
                    "a single-rack ring has neither");
            }
            return;
        }
        if (ring.spine() == null)
        {
            errors.add(spinePath, "a ring with racks needs the name of its spine appliance");
        }
        else if (!isName(ring.spine()))
        {
            errors.add(spinePath, "spine name '" + ring.spine() + "' " + NAME_RULE);
        }
        if (ring.racks().size() < 2)
        {
            errors.add(racksPath, "a multi-rack ring needs at least 2 racks, got " + ring.racks().size() +
                " (a single rack is a flat ring: remove racks and spine)");
        }
        final Map<String, String> leaves = new HashMap<>();
        int expected = 0;
        boolean consecutive = true;
        for (int k = 0; k < ring.racks().size(); k++)
        {
            final RackConfig rack = ring.racks().get(k);
            final String rackPath = index(racksPath, k);
            final String leafPath = child(rackPath, "leaf");
            if (!isName(rack.leaf()))
            {
                errors.add(leafPath, "leaf name '" + rack.leaf() + "' " + NAME_RULE);
            }
            else if (rack.leaf().equals(ring.spine()))
            {
                errors.add(leafPath, "'" + rack.leaf() + "' is the ring's spine: an appliance has one role in a " +
                    "ring");
            }
            else
            {
                final String previous = leaves.putIfAbsent(rack.leaf(), leafPath);
                if (previous != null)
                {
                    errors.add(leafPath, "duplicate leaf '" + rack.leaf() + "' (also " + previous +
                        "): an appliance serves one rack of a ring");
                }
            }
            final String ranksPath = child(rackPath, "ranks");
            if (rack.ranks().isEmpty())
            {
                errors.add(ranksPath, "a rack needs at least one rank");
                consecutive = false;
            }
            for (int i = 0; i < rack.ranks().size() && consecutive; i++)
            {
                final int rank = rack.ranks().get(i);
                if (rank != expected)
                {
                    errors.add(index(ranksPath, i), "expected rank " + expected + ", got " + rank +
                        " (racks hold consecutive ranks in ring order, rack 0 from rank 0, so that each rack has " +
                        "one connection leaving it and one entering it)");
                    consecutive = false;
                }
                expected++;
            }
        }
        if (consecutive && expected != ring.worldSize())
        {
            errors.add(racksPath, "the racks hold ranks 0.." + (expected - 1) + " but the ring has " +
                ring.worldSize() + " members: every rank must be in a rack");
        }
        if (!RingConfig.isValidTag(ring.inetTag()) || !RingConfig.isValidTag(ring.resultTag()))
        {
            return;
        }
        if (ring.inetTagValue() == Hierarchy.PARTIAL_TAG || ring.resultTagValue() == Hierarchy.PARTIAL_TAG)
        {
            errors.add(child(path, ring.inetTagValue() == Hierarchy.PARTIAL_TAG ? "inetTag" : "resultTag"),
                "the tag NRPT marks a leaf's partial sums; a multi-rack ring's tags must differ from it");
        }
        else if (ring.inetTag().equals(ring.resultTag()))
        {
            errors.add(child(path, "resultTag"), "a multi-rack ring needs a resultTag other than its inetTag: " +
                "a leaf tells the spine's result from a raw gradient by it");
        }
    }
}
