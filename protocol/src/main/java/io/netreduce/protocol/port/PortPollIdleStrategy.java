package io.netreduce.protocol.port;

import org.agrona.concurrent.IdleStrategy;

/**
 * An idle strategy for a receive loop on cores it shares with other work: after a duty cycle that found nothing it
 * spins a little (a burst's next frame is usually microseconds away), then yields, then blocks in {@code poll(2)}
 * on the ports' receive sockets for at most {@code maxBlockMs} (so commands and timers are still served), and
 * wakes as soon as a frame arrives. Busy, it costs nothing more than a counter; idle, it costs no CPU, where a
 * parking backoff wakes thousands of times a second and a spinning one takes a whole core.
 * <p>
 * Not thread-safe: one per receiving thread.
 */
public final class PortPollIdleStrategy implements IdleStrategy
{
    /** Empty duty cycles spent spinning before yielding. */
    public static final int DEFAULT_SPINS = 100;
    /** Empty duty cycles spent yielding before blocking. */
    public static final int DEFAULT_YIELDS = 10;
    /** Longest block in poll(2): bounds the delay of work that does not arrive on a port (commands, timers). */
    public static final int DEFAULT_MAX_BLOCK_MS = 1;

    private final PortPoller poller;
    private final int spins;
    private final int yields;
    private final int maxBlockMs;
    private int idleCycles;

    public PortPollIdleStrategy(final PortPoller poller)
    {
        this(poller, DEFAULT_SPINS, DEFAULT_YIELDS, DEFAULT_MAX_BLOCK_MS);
    }

    public PortPollIdleStrategy(final PortPoller poller, final int spins, final int yields, final int maxBlockMs)
    {
        if (spins < 0 || yields < 0 || maxBlockMs < 1)
        {
            throw new IllegalArgumentException("spins and yields must be >= 0 and maxBlockMs >= 1: " + spins + ", " +
                yields + ", " + maxBlockMs);
        }
        this.poller = poller;
        this.spins = spins;
        this.yields = yields;
        this.maxBlockMs = maxBlockMs;
    }

    @Override
    public void idle(final int workCount)
    {
        if (workCount > 0)
        {
            idleCycles = 0;
            return;
        }
        idle();
    }

    @Override
    public void idle()
    {
        final int cycle = idleCycles++;
        if (cycle < spins)
        {
            Thread.onSpinWait();
        }
        else if (cycle < spins + yields)
        {
            Thread.yield();
        }
        else if (poller.await(maxBlockMs))
        {
            idleCycles = 0;
        }
    }

    @Override
    public void reset()
    {
        idleCycles = 0;
    }

    @Override
    public String alias()
    {
        return "poll";
    }
}
