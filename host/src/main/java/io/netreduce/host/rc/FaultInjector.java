package io.netreduce.host.rc;

import java.util.SplittableRandom;

/**
 * Drops packets on purpose, for tests: each packet an endpoint sends (requests, ACKs, NAKs, CNPs) is dropped
 * with {@link RcConfig#sendDropProbability()}, each RoCE frame it receives with
 * {@link RcConfig#receiveDropProbability()}. Seeded, so a failing run replays; drops are counted here and in the
 * owning queue pair's {@link QpCounters}.
 */
public final class FaultInjector
{
    private final SplittableRandom random;
    private final double sendDrop;
    private final double receiveDrop;
    private long sendDrops;
    private long receiveDrops;

    public FaultInjector(final double sendDrop, final double receiveDrop, final long seed)
    {
        this.random = new SplittableRandom(seed);
        this.sendDrop = sendDrop;
        this.receiveDrop = receiveDrop;
    }

    public boolean dropOnSend()
    {
        if (sendDrop > 0 && random.nextDouble() < sendDrop)
        {
            sendDrops++;
            return true;
        }
        return false;
    }

    public boolean dropOnReceive()
    {
        if (receiveDrop > 0 && random.nextDouble() < receiveDrop)
        {
            receiveDrops++;
            return true;
        }
        return false;
    }

    public long sendDrops()
    {
        return sendDrops;
    }

    public long receiveDrops()
    {
        return receiveDrops;
    }
}
