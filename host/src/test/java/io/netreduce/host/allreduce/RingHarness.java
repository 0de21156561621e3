package io.netreduce.host.allreduce;

import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import org.agrona.concurrent.CachedNanoClock;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.function.IntFunction;

/**
 * W software RC endpoints on MemoryPorts behind a {@link TestSwitch}, one {@link RingLink} each, connected as a
 * ring, all driven from the test thread on one manual clock (deterministic, no sleeping).
 */
final class RingHarness implements AutoCloseable
{
    final CachedNanoClock clock = new CachedNanoClock();
    final TestSwitch fabric = new TestSwitch();
    final RcEndpoint[] endpoints;
    final RingLink[] links;
    final int world;
    long stepNs = 5_000;
    /** Another agent on the fabric (the appliance), run every step after the switch. */
    java.util.function.IntSupplier extraWork = () -> 0;

    RingHarness(final int world, final IntFunction<RcConfig> configs, final int sendBytes, final int receiveBytes)
    {
        this(world, configs, (endpoint, clock, rank) -> new RingLink(endpoint, clock, rank, world, sendBytes,
            receiveBytes));
    }

    /** Makes rank r's link on its endpoint, e.g. over regions registered on existing memory. */
    interface LinkFactory
    {
        RingLink make(RcEndpoint endpoint, org.agrona.concurrent.NanoClock clock, int rank);
    }

    RingHarness(final int world, final IntFunction<RcConfig> configs, final LinkFactory factory)
    {
        this.world = world;
        clock.update(1_000_000_000L);
        endpoints = new RcEndpoint[world];
        links = new RingLink[world];
        for (int r = 0; r < world; r++)
        {
            final MemoryPort port = new MemoryPort("w" + r);
            final long mac = mac(r);
            fabric.attach(port, mac);
            endpoints[r] = new RcEndpoint(port, configs.apply(r), clock, ip(r), mac);
            links[r] = factory.make(endpoints[r], clock, r);
        }
        for (int r = 0; r < world; r++)
        {
            links[r].connect(links[(r + 1) % world].receiveInfo(), links[(r + world - 1) % world].sendInfo());
        }
    }

    static long mac(final int rank)
    {
        return 0x02_77_00_00_00_01L + rank;
    }

    static InetAddress ip(final int rank)
    {
        try
        {
            return InetAddress.getByName("10.77.0." + (rank + 1));
        }
        catch (final UnknownHostException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * One duty cycle of every endpoint and the switch, then poll the operations.
     */
    void step(final AllReduce[] ops)
    {
        clock.advance(stepNs);
        for (final RcEndpoint endpoint : endpoints)
        {
            endpoint.doWork();
        }
        fabric.doWork();
        extraWork.getAsInt();
        fabric.doWork();
        for (final AllReduce op : ops)
        {
            op.poll();
        }
    }

    /**
     * Step until every operation is done.
     *
     * @return steps taken.
     */
    int runToCompletion(final AllReduce[] ops, final int maxSteps)
    {
        for (int i = 0; i < maxSteps; i++)
        {
            boolean done = true;
            for (final AllReduce op : ops)
            {
                done &= op.isDone();
            }
            if (done)
            {
                return i;
            }
            step(ops);
        }
        final StringBuilder state = new StringBuilder();
        for (final RingLink link : links)
        {
            state.append('\n').append(link.describe());
        }
        throw new AssertionError("all-reduce not complete after " + maxSteps + " steps" + state);
    }

    @Override
    public void close()
    {
        for (final RcEndpoint endpoint : endpoints)
        {
            endpoint.close();
        }
    }
}
