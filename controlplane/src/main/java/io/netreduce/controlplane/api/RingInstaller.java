package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.RingRef;

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
}
