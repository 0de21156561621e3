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
    /**
     * How long the strategy may block now, in milliseconds: a loop with timers of its own (an RC endpoint's
     * retransmission and ACK deadlines) says how soon it must run again. Less than 1 means "do not block: yield";
     * {@link #RESTART} means the limit made work for the loop (an RC endpoint's coalesced ACKs made due): neither
     * block nor yield, and spin again from the start after the next duty cycle.
     */
    @FunctionalInterface
    public interface BlockLimit
    {
        int maxBlockMs();
    }

    /** What a {@link BlockLimit} returns when it made work for the loop instead of letting it wait. */
    public static final int RESTART = Integer.MIN_VALUE;

    /** Empty duty cycles spent spinning before yielding. */
    public static final int DEFAULT_SPINS = 100;
    /** Empty duty cycles spent yielding before blocking. */
    public static final int DEFAULT_YIELDS = 10;
    /** Longest block in poll(2): bounds the delay of work that does not arrive on a port (commands, timers). */
    public static final int DEFAULT_MAX_BLOCK_MS = 1;

    private final PortPoller poller;
    private final int spins;
    private final int yields;
    private final BlockLimit limit;
    private int idleCycles;
    private long blocks;
    private long yielded;

    public PortPollIdleStrategy(final PortPoller poller)
    {
        this(poller, DEFAULT_SPINS, DEFAULT_YIELDS, DEFAULT_MAX_BLOCK_MS);
    }

    public PortPollIdleStrategy(final PortPoller poller, final int spins, final int yields, final int maxBlockMs)
    {
        this(poller, spins, yields, () -> maxBlockMs);
        if (maxBlockMs < 1)
        {
            throw new IllegalArgumentException("maxBlockMs must be >= 1: " + maxBlockMs);
        }
    }

    /**
     * @param limit how long a block may last each time the strategy would block.
     */
    public PortPollIdleStrategy(final PortPoller poller, final int spins, final int yields, final BlockLimit limit)
    {
        if (spins < 0 || yields < 0)
        {
            throw new IllegalArgumentException("spins and yields must be >= 0: " + spins + ", " + yields);
        }
        this.poller = poller;
        this.spins = spins;
        this.yields = yields;
        this.limit = limit;
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
            yielded++;
            Thread.yield();
        }
        else
        {
            final int blockMs = limit.maxBlockMs();
            if (blockMs == RESTART)
            {
                idleCycles = 0;
                return;
            }
            if (blockMs < 1)
            {
                yielded++;
                Thread.yield();
                return;
            }
            blocks++;
            if (poller.await(blockMs))
            {
                idleCycles = 0;
            }
        }
    }

    /**
     * @return how many times this strategy blocked in poll(2) (for reports and tests).
     */
    public long blocks()
    {
        return blocks;
    }

    /**
     * @return how many times this strategy yielded the core (for reports and tests).
     */
    public long yielded()
    {
        return yielded;
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
