package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.RingRef;
import io.netreduce.controlplane.config.SwitchMlJobConfig;

/**
 * Where configuration changes go once validated: the daemon's implementation turns them into dataplane commands
 * (install ring, remove ring) on the bounded command queue. Called on the control thread, removals first.
 */
public interface RingInstaller
{
    /** Does nothing: used when no dataplane is attached. */
    RingInstaller NONE = new RingInstaller()
    {
        @Override
        public void install(final RingRef ring)
        {
        }

        @Override
        public void remove(final RingRef ring)
        {
        }
    };

    /**
     * @param ring a ring to start aggregating.
     */
    void install(RingRef ring);

    /**
     * @param ring a ring to stop aggregating; its traffic passes through afterwards.
     */
    void remove(RingRef ring);

    /**
     * @param job      the job's name.
     * @param switchml a SwitchML job to start aggregating, with a fresh pool.
     */
    default void installSwitchMl(final String job, final SwitchMlJobConfig switchml)
    {
    }

    /**
     * @param job the name of a SwitchML job to stop aggregating; its workers' packets are dropped afterwards.
     */
    default void removeSwitchMl(final String job)
    {
    }
}
