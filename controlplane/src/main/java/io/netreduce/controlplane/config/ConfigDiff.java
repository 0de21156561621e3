package io.netreduce.controlplane.config;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * What changes between a running configuration and a new one, at ring granularity, so a reload touches only the
 * rings that changed. A ring is identified by (job, ring id); a ring whose settings or members changed is
 * removed and added again (its in-flight aggregators cannot survive a change of window, MsgLen or members), and
 * is also listed in {@link #ringsChanged()} for reporting. Apply {@link #ringsRemoved()} before
 * {@link #ringsAdded()}: a ring id may move from one job to another.
 *
 * @param jobsAdded        jobs only in the new configuration.
 * @param jobsRemoved      jobs only in the old configuration.
 * @param ringsAdded       rings to install: rings of added jobs, new rings, and the new form of changed rings.
 * @param ringsRemoved     rings to remove: rings of removed jobs, dropped rings, and the old form of changed rings.
 * @param ringsChanged     the new form of rings present in both with different settings (also in added/removed).
 * @param ringsUnchanged   rings to leave alone.
 * @param applianceChanged whether the appliance section differs; that part cannot change without a restart.
 */
public record ConfigDiff(
    List<String> jobsAdded,
    List<String> jobsRemoved,
    List<RingRef> ringsAdded,
    List<RingRef> ringsRemoved,
    List<RingRef> ringsChanged,
    List<RingRef> ringsUnchanged,
    boolean applianceChanged)
{
    /**
     * Canonical constructor: copies the lists so the record is immutable.
     */
    public ConfigDiff
    {
        jobsAdded = List.copyOf(jobsAdded);
        jobsRemoved = List.copyOf(jobsRemoved);
        ringsAdded = List.copyOf(ringsAdded);
        ringsRemoved = List.copyOf(ringsRemoved);
        ringsChanged = List.copyOf(ringsChanged);
        ringsUnchanged = List.copyOf(ringsUnchanged);
    }

    /**
     * @param oldConfig the running configuration.
     * @param newConfig the configuration to move to.
     * @return the difference; a pure function of its arguments.
     */
    public static ConfigDiff between(final NetreduceConfig oldConfig, final NetreduceConfig newConfig)
    {
        final Map<String, JobConfig> oldJobs = byName(oldConfig);
        final Map<String, JobConfig> newJobs = byName(newConfig);
        final List<String> jobsAdded = new ArrayList<>();
        final List<String> jobsRemoved = new ArrayList<>();
        final List<RingRef> added = new ArrayList<>();
        final List<RingRef> removed = new ArrayList<>();
        final List<RingRef> changed = new ArrayList<>();
        final List<RingRef> unchanged = new ArrayList<>();

        for (final JobConfig oldJob : oldJobs.values())
        {
            final JobConfig newJob = newJobs.get(oldJob.name());
            if (newJob == null)
            {
                jobsRemoved.add(oldJob.name());
                oldJob.rings().forEach(ring -> removed.add(new RingRef(oldJob.name(), ring)));
                continue;
            }
            final Map<Integer, RingConfig> newRings = byId(newJob);
            for (final RingConfig oldRing : oldJob.rings())
            {
                final RingConfig newRing = newRings.get(oldRing.id());
                if (newRing == null)
                {
                    removed.add(new RingRef(oldJob.name(), oldRing));
                }
                else if (!Objects.equals(oldRing, newRing))
                {
                    removed.add(new RingRef(oldJob.name(), oldRing));
                    added.add(new RingRef(newJob.name(), newRing));
                    changed.add(new RingRef(newJob.name(), newRing));
                }
                else
                {
                    unchanged.add(new RingRef(newJob.name(), newRing));
                }
            }
            final Map<Integer, RingConfig> oldRings = byId(oldJob);
            for (final RingConfig newRing : newJob.rings())
            {
                if (!oldRings.containsKey(newRing.id()))
                {
                    added.add(new RingRef(newJob.name(), newRing));
                }
            }
        }
        for (final JobConfig newJob : newJobs.values())
        {
            if (!oldJobs.containsKey(newJob.name()))
            {
                jobsAdded.add(newJob.name());
                newJob.rings().forEach(ring -> added.add(new RingRef(newJob.name(), ring)));
            }
        }
        return new ConfigDiff(jobsAdded, jobsRemoved, added, removed, changed, unchanged,
            !Objects.equals(oldConfig.appliance(), newConfig.appliance()));
    }

    /**
     * @return true if applying this diff changes no ring.
     */
    public boolean isEmpty()
    {
        return ringsAdded.isEmpty() && ringsRemoved.isEmpty() && jobsAdded.isEmpty() && jobsRemoved.isEmpty();
    }

    private static Map<String, JobConfig> byName(final NetreduceConfig config)
    {
        final Map<String, JobConfig> jobs = new LinkedHashMap<>();
        config.jobs().forEach(job -> jobs.put(job.name(), job));
        return jobs;
    }

    private static Map<Integer, RingConfig> byId(final JobConfig job)
    {
        final Map<Integer, RingConfig> rings = new LinkedHashMap<>();
        job.rings().forEach(ring -> rings.put(ring.id(), ring));
        return rings;
    }
}
