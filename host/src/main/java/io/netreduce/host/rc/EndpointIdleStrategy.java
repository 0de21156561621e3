package io.netreduce.host.rc;

import io.netreduce.protocol.port.PortPoller;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.NanoClock;

import java.util.List;

/**
 * How a loop driving an {@link RcEndpoint} waits on a core it shares with other work (the trainer beside a
 * worker, W workers and the appliance on a small test bed). After a duty cycle that did nothing it spins a
 * little, then yields, then blocks in {@code poll(2)} on the endpoint's port until a frame arrives or the
 * endpoint's next deadline (a retransmission timer, a coalesced ACK, a rate-limited send) comes due, at most
 * {@link #DEFAULT_MAX_BLOCK_MS}. A spinning or yielding loop takes a whole core from whoever shares it, and the
 * appliance and the other ranks are then slower to answer than the link is.
 * <p>
 * Not thread-safe: one per driving thread.
 */
public final class EndpointIdleStrategy implements IdleStrategy, AutoCloseable
{
    /** Empty duty cycles spent spinning before yielding: a window's next ACK is usually microseconds away. */
    public static final int DEFAULT_SPINS = 200;
    /** Empty duty cycles spent yielding before blocking. */
    public static final int DEFAULT_YIELDS = 20;
    /** Longest single block, so a loop that also polls something else (an all-reduce) looks at it again. */
    public static final int DEFAULT_MAX_BLOCK_MS = 10;

    private static final long NS_PER_MS = 1_000_000L;

    private final RcEndpoint endpoint;
    private final NanoClock clock;
    private final PortPoller poller;
    private int idleCycles;
    private long blocks;

    EndpointIdleStrategy(final RcEndpoint endpoint, final NanoClock clock)
    {
        this.endpoint = endpoint;
        this.clock = clock;
        this.poller = new PortPoller(List.of(endpoint.port()));
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
        if (cycle < DEFAULT_SPINS)
        {
            Thread.onSpinWait();
            return;
        }
        if (cycle < DEFAULT_SPINS + DEFAULT_YIELDS || !poller.canBlock())
        {
            Thread.yield();
            return;
        }
        final long nowNs = clock.nanoTime();
        final long deadline = endpoint.nextDeadlineNs(nowNs);
        final long waitNs = deadline == Long.MAX_VALUE ? DEFAULT_MAX_BLOCK_MS * NS_PER_MS : deadline - nowNs;
        if (waitNs < NS_PER_MS)
        {
            // poll(2) counts in milliseconds: a deadline closer than that is served by yielding.
            Thread.yield();
            return;
        }
        blocks++;
        if (poller.await((int)Math.min(waitNs / NS_PER_MS, DEFAULT_MAX_BLOCK_MS)))
        {
            idleCycles = 0;
        }
    }

    @Override
    public void reset()
    {
        idleCycles = 0;
    }

    /**
     * @return how many times this strategy blocked in poll(2) (for reports and tests).
     */
    public long blocks()
    {
        return blocks;
    }

    /**
     * Release the poller (the endpoint does when it closes).
     */
    @Override
    public void close()
    {
        poller.close();
    }

    @Override
    public String alias()
    {
        return "endpoint-poll";
    }
}
