package io.netreduce.host.rc;

import io.netreduce.protocol.port.Doorbell;
import io.netreduce.protocol.port.PortPollIdleStrategy;
import io.netreduce.protocol.port.PortPoller;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.NanoClock;

import java.util.List;

/**
 * How a loop driving an {@link RcEndpoint} waits on a core it shares with other work (the trainer beside a
 * worker, W workers and the appliance on a small test bed). After a duty cycle that did nothing it spins a
 * little, then yields, then blocks in {@code poll(2)} on the endpoint's port until a frame arrives or the
 * endpoint's next deadline (a retransmission timer, an RNR hold) comes due, at most {@link #DEFAULT_MAX_BLOCK_MS}.
 * A spinning or yielding loop takes a whole core from whoever shares it, and the appliance and the other ranks are
 * then slower to answer than the link is.
 * <p>
 * An ACK being coalesced kept it from blocking: due within {@link RcConfig#ackCoalesceDelayNs()} (20 us), less than
 * {@code poll(2)}'s millisecond, it made the loop yield until then. When the strategy is about to block it makes
 * such ACKs due at once instead ({@link RcEndpoint#expediteAcks}): no more packets came to share them, and one sent
 * now costs less than yielding until it is due (and the peer's window moves sooner). Any other deadline closer than
 * a millisecond is still served by yielding.
 * <p>
 * Not thread-safe: one per driving thread.
 */
public final class EndpointIdleStrategy implements IdleStrategy, AutoCloseable
{
    /**
     * Empty duty cycles spent spinning before yielding: a window's next ACK is usually microseconds away, but an
     * endpoint shares its cores with its trainer (and, on the test bed, with the other ranks and the appliance), and
     * spinning takes cycles they need. Measured on the bed (W = 4, 64 MiB, two runs each, one after the other):
     * 10 spins and 2 yields against 200 and 20 took unshaped calls from 497-503 ms to 423-442 ms, left 1 Gbit/s calls
     * where they were (589-593 against 565-594 ms), and a DDP mlp step from 140.2 to 132.7 ms (one run each).
     */
    public static final int DEFAULT_SPINS = 10;
    /** Empty duty cycles spent yielding before blocking (see {@link #DEFAULT_SPINS}). */
    public static final int DEFAULT_YIELDS = 2;
    /** Longest single block, so a loop that also polls something else (an all-reduce) looks at it again. */
    public static final int DEFAULT_MAX_BLOCK_MS = 10;

    /**
     * Longest single block when a {@link Doorbell} wakes the loop for its other work: only timers are left to
     * bound it, and those the endpoint's deadline already covers.
     */
    public static final int DOORBELL_MAX_BLOCK_MS = 100;

    private static final long NS_PER_MS = 1_000_000L;

    private final PortPoller poller;
    private final PortPollIdleStrategy strategy;
    private long expeditedAcks;

    EndpointIdleStrategy(final RcEndpoint endpoint, final NanoClock clock, final Doorbell doorbell)
    {
        this.poller = new PortPoller(List.of(endpoint.port()), doorbell);
        final int maxBlockMs = doorbell != null ? DOORBELL_MAX_BLOCK_MS : DEFAULT_MAX_BLOCK_MS;
        this.strategy = new PortPollIdleStrategy(poller, DEFAULT_SPINS, DEFAULT_YIELDS, () ->
        {
            final int expedited = endpoint.expediteAcks();
            if (expedited > 0)
            {
                // The next duty cycle sends them; then the loop waits again from the start.
                expeditedAcks += expedited;
                return PortPollIdleStrategy.RESTART;
            }
            if (!poller.canBlock())
            {
                return 0; // a port with no socket (tests' in-memory links): keep yielding, as before
            }
            final long nowNs = clock.nanoTime();
            final long deadline = endpoint.nextDeadlineNs(nowNs);
            // poll(2) counts in milliseconds: a deadline closer than that is served by yielding (0). After the ACKs
            // above that is rare (a retransmission timer about to fire, an RNR hold); ppoll(2) to the nanosecond
            // was tried for it and was slower under load (docs/performance.md, History).
            return deadline == Long.MAX_VALUE ? maxBlockMs :
                (int)Math.min(Math.max(0, (deadline - nowNs) / NS_PER_MS), maxBlockMs);
        });
    }

    @Override
    public void idle(final int workCount)
    {
        strategy.idle(workCount);
    }

    @Override
    public void idle()
    {
        strategy.idle();
    }

    @Override
    public void reset()
    {
        strategy.reset();
    }

    /**
     * @return how many times this strategy blocked in poll(2) (for reports and tests).
     */
    public long blocks()
    {
        return strategy.blocks();
    }

    /**
     * @return how many times this strategy yielded the core (for reports and tests).
     */
    public long yields()
    {
        return strategy.yielded();
    }

    /**
     * @return how many coalesced ACKs this strategy made due at once rather than yield until their delay ran out.
     */
    public long expeditedAcks()
    {
        return expeditedAcks;
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
