package io.netreduce.host.rc;

/**
 * A requester's send-rate control: a token bucket whose rate follows a simplified DCQCN.
 * <ul>
 *   <li>The rate starts at the line rate, where the limiter is off (every packet passes; the port and the link
 *       set the pace).</li>
 *   <li>On a CNP: the target rate becomes the current rate and the current rate is multiplied by
 *       {@link RcConfig#rateDecreaseFactor()} (0.5: DCQCN's cut with alpha fixed at 1), never below
 *       {@link RcConfig#minRateBitsPerSecond()}.</li>
 *   <li>Every {@link RcConfig#rateIncreaseIntervalNs()} without a CNP: for the first
 *       {@link RcConfig#fastRecoverySteps()} steps the rate moves half way to the target (fast recovery); after
 *       that the target grows by {@link RcConfig#additiveIncreaseBitsPerSecond()} first (additive increase).
 *       Within one additive step of the line rate the limiter switches off again.</li>
 * </ul>
 * DCQCN's alpha estimator and byte counter are left out: with a fixed alpha of 1 every CNP halves the rate, which
 * is the conservative end of DCQCN's range and enough to stop a software sender from overrunning a marked queue.
 * Tokens are bytes; the bucket holds at most {@link RcConfig#rateBurstBytes()} and may go negative by one packet
 * (a packet is sent whenever the balance is positive), so the long-run rate is exact.
 */
public final class RateLimiter
{
    private static final double NANOS_PER_SECOND = 1e9;

    private final long lineRate;
    private final long minRate;
    private final double decreaseFactor;
    private final long increaseIntervalNs;
    private final long additiveIncrease;
    private final int fastRecoverySteps;
    private final int burstBytes;

    private double currentRate;
    private double targetRate;
    private double tokens;
    private long lastRefillNs;
    private long lastIncreaseNs;
    private int recoveryStep;
    private boolean limiting;
    private long cuts;

    public RateLimiter(final RcConfig config)
    {
        lineRate = config.lineRateBitsPerSecond();
        minRate = Math.min(config.minRateBitsPerSecond(), lineRate);
        decreaseFactor = config.rateDecreaseFactor();
        increaseIntervalNs = config.rateIncreaseIntervalNs();
        additiveIncrease = config.additiveIncreaseBitsPerSecond();
        fastRecoverySteps = config.fastRecoverySteps();
        burstBytes = config.rateBurstBytes();
        currentRate = lineRate;
        targetRate = lineRate;
    }

    /**
     * @return true if a packet of {@code bytes} may be sent now (and charges it).
     */
    public boolean tryAcquire(final long nowNs, final int bytes)
    {
        if (!limiting)
        {
            return true;
        }
        final long elapsed = nowNs - lastRefillNs;
        if (elapsed > 0)
        {
            tokens = Math.min(burstBytes, tokens + elapsed * currentRate / (8 * NANOS_PER_SECOND));
            lastRefillNs = nowNs;
        }
        if (tokens <= 0)
        {
            return false;
        }
        tokens -= bytes;
        return true;
    }

    /**
     * A CNP arrived for this queue pair.
     */
    public void onCongestionNotification(final long nowNs)
    {
        if (!limiting)
        {
            limiting = true;
            tokens = 0;
            lastRefillNs = nowNs;
        }
        targetRate = currentRate;
        currentRate = Math.max(minRate, currentRate * decreaseFactor);
        recoveryStep = 0;
        lastIncreaseNs = nowNs;
        cuts++;
    }

    /**
     * Advance rate recovery; call once per duty cycle.
     */
    public void onTimer(final long nowNs)
    {
        if (!limiting || nowNs - lastIncreaseNs < increaseIntervalNs)
        {
            return;
        }
        lastIncreaseNs = nowNs;
        if (recoveryStep < fastRecoverySteps)
        {
            recoveryStep++;
        }
        else
        {
            targetRate = Math.min(lineRate, targetRate + additiveIncrease);
        }
        currentRate = (currentRate + targetRate) / 2;
        if (currentRate >= lineRate - additiveIncrease)
        {
            currentRate = lineRate;
            targetRate = lineRate;
            limiting = false;
        }
    }

    /**
     * @return the current rate in bit/s (the line rate when not limiting).
     */
    public long currentRateBitsPerSecond()
    {
        return (long)currentRate;
    }

    public long targetRateBitsPerSecond()
    {
        return (long)targetRate;
    }

    public boolean isLimiting()
    {
        return limiting;
    }

    /**
     * @return rate cuts applied (one per CNP received).
     */
    public long cuts()
    {
        return cuts;
    }
}
