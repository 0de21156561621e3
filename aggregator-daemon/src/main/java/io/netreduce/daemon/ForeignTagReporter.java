package io.netreduce.daemon;

import io.netreduce.dataplane.agent.DataplaneProxy;
import io.netreduce.dataplane.counters.DataplaneCounter;
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
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import java.util.function.ToIntFunction;

/**
 * Logs, once per connection, a client that talks on a ring edge without the ring's InetTag: the dataplane passes
 * such a connection through unaggregated (it may be any other RDMA traffic between the two hosts), so without
 * this line a client with a different tag would see only its own timeouts. Drains the dataplane's
 * {@link ForeignTagEvents} once a second on its own daemon thread; never on the dataplane thread.
 * <p>
 * Any host on the switch can send such first packets, one connection each, so the lines are rate-limited per source
 * address ({@link #LINES_PER_SOURCE} a minute, then one line saying how many more there were), and events the
 * dataplane could not post (its buffer full) are counted there and reported here, at most once a minute.
 */
final class ForeignTagReporter implements AutoCloseable
{
    /** Lines logged per source address per {@link #WINDOW_NS}. */
    static final int LINES_PER_SOURCE = 5;
    /** The rate limit's window: a minute. */
    static final long WINDOW_NS = TimeUnit.SECONDS.toNanos(60);
    /** Sources tracked by the rate limit; beyond them, sources share one limit. */
    static final int MAX_SOURCES = 4096;
    private static final Logger LOG = LoggerFactory.getLogger(ForeignTagReporter.class);

    private final ToIntFunction<Consumer<ForeignTagEvents.Event>> drainer;
    private final Supplier<Collection<RingDefinition>> rings;
    private final LongSupplier lostEvents;
    private final LongSupplier clock;
    private final Consumer<String> log;
    private final RateLimitedLog limit;
    private long lostReported;
    private long lostLineNs;
    private boolean lostLogged;
    private ScheduledExecutorService scheduler;

    /**
     * @param drainer    hands every waiting event to its argument, answers how many.
     * @param rings      the installed rings (to name the edge).
     * @param lostEvents the dataplane's count of events it could not post.
     * @param clock      a monotonic clock in nanoseconds.
     * @param log        where lines go (WARN in the daemon).
     */
    ForeignTagReporter(
        final ToIntFunction<Consumer<ForeignTagEvents.Event>> drainer,
        final Supplier<Collection<RingDefinition>> rings,
        final LongSupplier lostEvents,
        final LongSupplier clock,
        final Consumer<String> log)
    {
        this.drainer = drainer;
        this.rings = rings;
        this.lostEvents = lostEvents;
        this.clock = clock;
        this.log = log;
        this.limit = new RateLimitedLog(LINES_PER_SOURCE, WINDOW_NS, MAX_SOURCES, clock, log,
            (source, suppressed) -> "foreign-tag reports from " + source + ": " + suppressed + " more connection(s) " +
                "on ring edges without their ring's InetTag in the last " + TimeUnit.NANOSECONDS.toSeconds(WINDOW_NS) +
                " s were not logged one by one (counter foreign_tag_on_ring_edge counts them all)");
        this.lostReported = lostEvents.getAsLong();
    }

    static ForeignTagReporter start(final DataplaneProxy proxy, final Supplier<Collection<RingDefinition>> rings)
    {
        final ForeignTagReporter reporter = new ForeignTagReporter(proxy::drainForeignTags, rings,
            () -> proxy.counter(DataplaneCounter.FOREIGN_TAG_EVENTS_LOST), System::nanoTime, LOG::warn);
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
     * Log a line per waiting event, within each source's limit; then what the limit suppressed in windows that
     * ended, and the events the dataplane lost.
     *
     * @return events drained.
     */
    synchronized int drain()
    {
        final int drained = drainer.applyAsInt(event ->
        {
            final FlowKey key = event.connection();
            if (limit.admit(IpKey.toAddress(key.srcHigh(), key.srcLow()).getHostAddress()))
            {
                log.accept(describe(event, rings.get()));
            }
        });
        limit.flush();
        final long lost = lostEvents.getAsLong();
        final long now = clock.getAsLong();
        if (lost > lostReported && (!lostLogged || now - lostLineNs >= WINDOW_NS))
        {
            log.accept((lost - lostReported) + " connection(s) on ring edges without their ring's InetTag were not " +
                "reported: the dataplane's event buffer was full (counter foreign_tag_events_lost)");
            lostReported = lost;
            lostLineNs = now;
            lostLogged = true;
        }
        return drained;
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
