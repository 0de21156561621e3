package io.netreduce.daemon;

import io.netreduce.dataplane.agent.DataplaneProxy;
import io.netreduce.dataplane.netreduce.ForeignTagEvents;
import io.netreduce.dataplane.clt.FlowKey;
import io.netreduce.dataplane.clt.IpKey;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * Logs, once per connection, a client that talks on a ring edge without the ring's InetTag: the dataplane passes
 * such a connection through unaggregated (it may be any other RDMA traffic between the two hosts), so without
 * this line a client with a different tag would see only its own timeouts. Drains the dataplane's
 * {@link ForeignTagEvents} once a second on its own daemon thread; never on the dataplane thread.
 */
final class ForeignTagReporter implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(ForeignTagReporter.class);

    private final DataplaneProxy proxy;
    private final Supplier<Collection<RingDefinition>> rings;
    private final Consumer<String> log;
    private ScheduledExecutorService scheduler;

    ForeignTagReporter(
        final DataplaneProxy proxy, final Supplier<Collection<RingDefinition>> rings, final Consumer<String> log)
    {
        this.proxy = proxy;
        this.rings = rings;
        this.log = log;
    }

    static ForeignTagReporter start(final DataplaneProxy proxy, final Supplier<Collection<RingDefinition>> rings)
    {
        final ForeignTagReporter reporter = new ForeignTagReporter(proxy, rings, LOG::warn);
        reporter.scheduler = Executors.newSingleThreadScheduledExecutor(runnable ->
        {
            final Thread thread = new Thread(runnable, "netreduce-tag-reporter");
            thread.setDaemon(true);
            return thread;
        });
        reporter.scheduler.scheduleAtFixedRate(reporter::drainSafely, 1, 1, TimeUnit.SECONDS);
        return reporter;
    }

    private void drainSafely()
    {
        try
        {
            drain();
        }
        catch (final RuntimeException ex)
        {
            LOG.error("reporting foreign tags failed", ex);
        }
    }

    /**
     * Log one line per waiting event.
     *
     * @return lines logged.
     */
    int drain()
    {
        return proxy.drainForeignTags(event -> log.accept(describe(event, rings.get())));
    }

    static String describe(final ForeignTagEvents.Event event, final Collection<RingDefinition> installed)
    {
        final FlowKey key = event.connection();
        final InetAddress src = IpKey.toAddress(key.srcHigh(), key.srcLow());
        final InetAddress dst = IpKey.toAddress(key.dstHigh(), key.dstLow());
        final List<String> edges = new ArrayList<>();
        for (final RingDefinition ring : installed)
        {
            for (final RingMember member : ring.members())
            {
                final RingMember successor = ring.member((member.rank() + 1) % ring.worldSize());
                if (member.address().equals(src) && successor.address().equals(dst))
                {
                    edges.add("ring " + ring.ringId() + " (rank " + member.rank() + " -> " + successor.rank() +
                        ", expects InetTag " + tagText(ring.inetTag()) + ")");
                }
            }
        }
        final String found = event.ringId() < 0 ? "a payload shorter than an INA header" :
            "tag " + tagText(event.tag()) + " and RingID byte " + event.ringId();
        return "connection " + src.getHostAddress() + " -> " + dst.getHostAddress() + " QP " + key.qp() +
            " runs on the edge of " + (edges.isEmpty() ? "a ring" : String.join(", ", edges)) +
            " but its first message starts with " + found + " where an INA header would be: passed through " +
            "unaggregated. If it is a NetReduce client, give the ring its tag (rings[].inetTag) or fix the client.";
    }

    /**
     * @return the tag as hex and, when printable, as its four ASCII characters, e.g. {@code 0x4E524544 'NRED'}.
     */
    static String tagText(final int tag)
    {
        final StringBuilder ascii = new StringBuilder(4);
        for (int shift = 24; shift >= 0; shift -= 8)
        {
            final int c = (tag >>> shift) & 0xFF;
            if (c < 0x20 || c > 0x7E)
            {
                return String.format("0x%08X", tag);
            }
            ascii.append((char)c);
        }
        return String.format("0x%08X '%s'", tag, ascii);
    }

    @Override
    public void close()
    {
        if (scheduler != null)
        {
            scheduler.shutdownNow();
            drainSafely();
        }
    }
}
