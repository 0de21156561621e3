package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.ConfigDiff;
import io.netreduce.controlplane.config.RingRef;

import java.util.List;

/**
 * What a reload changed, with rings named {@code job/ringId}.
 *
 * @param jobsAdded       jobs added.
 * @param jobsRemoved     jobs removed.
 * @param ringsAdded      rings installed (including changed rings).
 * @param ringsRemoved    rings removed (including changed rings).
 * @param ringsChanged    rings re-installed because their settings changed.
 * @param ringsUnchanged  rings left running untouched.
 * @param restartRequired true if the appliance section changed, which only takes effect on restart.
 */
public record ReloadResult(
    List<String> jobsAdded,
    List<String> jobsRemoved,
    List<String> ringsAdded,
    List<String> ringsRemoved,
    List<String> ringsChanged,
    List<String> ringsUnchanged,
    boolean restartRequired)
{
    /**
     * @param diff the configuration difference that was applied.
     * @return the result describing it.
     */
    public static ReloadResult of(final ConfigDiff diff)
    {
        return new ReloadResult(diff.jobsAdded(), diff.jobsRemoved(), names(diff.ringsAdded()),
            names(diff.ringsRemoved()), names(diff.ringsChanged()), names(diff.ringsUnchanged()),
            diff.applianceChanged());
    }

    private static List<String> names(final List<RingRef> rings)
    {
        return rings.stream().map(ref -> ref.job() + "/" + ref.ring().id()).toList();
    }
}
