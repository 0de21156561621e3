package io.netreduce.protocol.testing;

import java.util.SplittableRandom;

/**
 * Runs a property as many independent random cases, each from its own seed drawn from one base seed, and names
 * the base seed when a case fails so the whole run can be replayed with {@code -Dnetreduce.test.seed=<seed>}.
 * Without that property each run draws a fresh base seed, so CI keeps exploring.
 * <p>
 * For property tests in every module (it needs no test framework: a failure is an {@link AssertionError}); the
 * appliance never uses it.
 */
public final class SeededCases
{
    public static final String SEED_PROPERTY = "netreduce.test.seed";

    /**
     * One case of a property.
     */
    @FunctionalInterface
    public interface Case
    {
        void run(SplittableRandom random, int index) throws Exception;
    }

    private SeededCases()
    {
    }

    /**
     * @return the base seed: {@code -Dnetreduce.test.seed} if given, else a fresh one.
     */
    public static long baseSeed()
    {
        final Long fixed = Long.getLong(SEED_PROPERTY);
        return null != fixed ? fixed : new SplittableRandom().nextLong();
    }

    public static void run(final String property, final int cases, final Case body)
    {
        final long base = baseSeed();
        final SplittableRandom seeds = new SplittableRandom(base);
        for (int i = 0; i < cases; i++)
        {
            final long seed = seeds.nextLong();
            try
            {
                body.run(new SplittableRandom(seed), i);
            }
            catch (final Exception | AssertionError ex)
            {
                throw new AssertionError(property + ": case " + i + " of " + cases + " failed (case seed " + seed +
                    "); replay with -D" + SEED_PROPERTY + "=" + base, ex);
            }
        }
    }
}
