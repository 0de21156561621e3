package io.netreduce.dataplane.frame;

import java.util.SplittableRandom;

/**
 * Drops a share of the arriving RoCEv2 frames before the appliance looks at them, for tests and drills of the
 * hosts' loss recovery ({@code appliance.dataplane.dropProbability}). Off unless configured; when off the cost is
 * one comparison per RoCEv2 frame.
 */
public final class FaultInjection
{
    private final double probability;
    private final SplittableRandom random;

    public FaultInjection(final double probability, final long seed)
    {
        if (!(probability >= 0.0 && probability <= 1.0))
        {
            throw new IllegalArgumentException("drop probability must be in [0, 1]: " + probability);
        }
        this.probability = probability;
        this.random = new SplittableRandom(seed);
    }

    /**
     * @return whether to drop the frame in hand.
     */
    public boolean shouldDrop()
    {
        return probability > 0.0 && random.nextDouble() < probability;
    }
}
