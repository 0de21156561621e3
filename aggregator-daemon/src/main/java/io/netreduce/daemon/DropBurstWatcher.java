package io.netreduce.daemon;

import io.netreduce.dataplane.counters.DataplaneCounter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.function.ToLongFunction;

/**
 * Rate-limited warnings for drop bursts: reads the dataplane's drop counters once per interval and, if any
 * increased, logs one line naming every reason that did, largest first:
 * <pre>
 * ring traffic dropped: 1532 first packet lost, 12 bad icrc in the last 1.0 s
 * </pre>
 * and, for the ports' own losses (the kernel's receive ring full, frames too long for a receive slot, offload frames
 * that cannot be split), a second line:
 * <pre>
 * port traffic dropped: 7431 eth0 rx_dropped (receive ring full) in the last 1.0 s
 * </pre>
 * At most one line per interval however often {@link #tick()} is called, never per packet; nothing when nothing
 * was dropped. The dataplane is not involved: counters are read from their shared buffers.
 */
public final class DropBurstWatcher implements AutoCloseable
{
    /** How often the daemon checks the drop counters. */
    public static final long DEFAULT_INTERVAL_NS = TimeUnit.SECONDS.toNanos(1);

    private static final Logger LOG = LoggerFactory.getLogger(DropBurstWatcher.class);
    private static final DataplaneCounter[] DROPS = dropReasons();

    /**
     * A port's drop counter: {@code what} names it in the line (port and counter), {@code value} reads it.
     */
    public record PortDrop(String what, LongSupplier value)
    {
    }

    private final ToLongFunction<DataplaneCounter> counters;
    private final List<PortDrop> portDrops;
    private final LongSupplier nanoClock;
    private final long intervalNs;
    private final Consumer<String> warn;
    private final long[] baseline = new long[DROPS.length];
    private final long[] portBaseline;
    private long lastCheckNs;
    private ScheduledExecutorService scheduler;

    /**
     * @param counters   reads a counter's current value.
     * @param nanoClock  a monotonic clock in nanoseconds ({@link System#nanoTime} in the daemon).
     * @param intervalNs the shortest time between two checks (and so two lines).
     * @param warn       where a line goes (a WARN log in the daemon).
     */
    public DropBurstWatcher(
        final ToLongFunction<DataplaneCounter> counters,
        final LongSupplier nanoClock,
        final long intervalNs,
        final Consumer<String> warn)
    {
        this(counters, List.of(), nanoClock, intervalNs, warn);
    }

    /**
     * @param portDrops the ports' drop counters, watched as the dataplane's are (a line of their own).
     */
    public DropBurstWatcher(
        final ToLongFunction<DataplaneCounter> counters,
        final List<PortDrop> portDrops,
        final LongSupplier nanoClock,
        final long intervalNs,
        final Consumer<String> warn)
    {
        if (intervalNs <= 0)
        {
            throw new IllegalArgumentException("interval must be positive: " + intervalNs);
        }
        this.counters = counters;
        this.nanoClock = nanoClock;
        this.intervalNs = intervalNs;
        this.warn = warn;
        for (int i = 0; i < DROPS.length; i++)
        {
            baseline[i] = counters.applyAsLong(DROPS[i]);
        }
        this.portDrops = List.copyOf(portDrops);
        portBaseline = new long[this.portDrops.size()];
        for (int i = 0; i < portBaseline.length; i++)
        {
            portBaseline[i] = this.portDrops.get(i).value().getAsLong();
        }
        lastCheckNs = nanoClock.getAsLong();
    }

    /**
     * Watch the counters every second on a daemon thread, warning through this class's logger.
     */
    public static DropBurstWatcher start(final ToLongFunction<DataplaneCounter> counters, final List<PortDrop> ports)
    {
        final DropBurstWatcher watcher = new DropBurstWatcher(counters, ports, System::nanoTime, DEFAULT_INTERVAL_NS,
            LOG::warn);
        watcher.scheduler = Executors.newSingleThreadScheduledExecutor(runnable ->
        {
            final Thread thread = new Thread(runnable, "netreduce-drop-watcher");
            thread.setDaemon(true);
            return thread;
        });
        watcher.scheduler.scheduleAtFixedRate(watcher::tickSafely, DEFAULT_INTERVAL_NS, DEFAULT_INTERVAL_NS,
            TimeUnit.NANOSECONDS);
        return watcher;
    }

    /**
     * Check the counters if an interval has passed since the last check; warn if any drop reason increased.
     *
     * @return the lines written (two, the dataplane's and the ports', joined by a newline, when both dropped), or
     *         null if none was.
     */
    public synchronized String tick()
    {
        final long now = nanoClock.getAsLong();
        final long elapsed = now - lastCheckNs;
        // A scheduler may run a little early; 1% of slack keeps a 1 s schedule from skipping every other tick.
        if (elapsed < intervalNs - intervalNs / 100)
        {
            return null;
        }
        lastCheckNs = now;
        final String ring = ringLine(elapsed);
        final String ports = portLine(elapsed);
        if (ring != null)
        {
            warn.accept(ring);
        }
        if (ports != null)
        {
            warn.accept(ports);
        }
        return ring == null ? ports : ports == null ? ring : ring + "\n" + ports;
    }

    private String portLine(final long elapsed)
    {
        final StringBuilder line = new StringBuilder();
        for (int i = 0; i < portBaseline.length; i++)
        {
            final long value = portDrops.get(i).value().getAsLong();
            if (value > portBaseline[i])
            {
                line.append(line.isEmpty() ? "port traffic dropped: " : ", ").append(value - portBaseline[i])
                    .append(' ').append(portDrops.get(i).what());
            }
            portBaseline[i] = value;
        }
        return line.isEmpty() ? null :
            line.append(inTheLast(elapsed)).toString();
    }

    private String ringLine(final long elapsed)
    {
        final List<long[]> increased = new ArrayList<>();
        for (int i = 0; i < DROPS.length; i++)
        {
            final long value = counters.applyAsLong(DROPS[i]);
            if (value > baseline[i])
            {
                increased.add(new long[]{ value - baseline[i], i });
            }
            baseline[i] = value;
        }
        if (increased.isEmpty())
        {
            return null;
        }
        increased.sort((a, b) -> a[0] != b[0] ? Long.compare(b[0], a[0]) : Long.compare(a[1], b[1]));
        final StringBuilder line = new StringBuilder("ring traffic dropped: ");
        for (int i = 0; i < increased.size(); i++)
        {
            final long[] entry = increased.get(i);
            line.append(i == 0 ? "" : ", ").append(entry[0]).append(' ')
                .append(DROPS[(int)entry[1]].reason().replace('_', ' '));
        }
        line.append(inTheLast(elapsed));
        return line.toString();
    }

    private static String inTheLast(final long elapsedNs)
    {
        return String.format(Locale.ROOT, " in the last %.1f s", elapsedNs / 1e9);
    }

    private void tickSafely()
    {
        try
        {
            tick();
        }
        catch (final RuntimeException ex)
        {
            // A failing check must not cancel the schedule (ScheduledExecutorService drops a task that throws).
            LOG.debug("drop watcher check failed", ex);
        }
    }

    @Override
    public void close()
    {
        if (scheduler != null)
        {
            scheduler.shutdownNow();
            scheduler = null;
        }
    }

    private static DataplaneCounter[] dropReasons()
    {
        final List<DataplaneCounter> drops = new ArrayList<>();
        for (final DataplaneCounter counter : DataplaneCounter.values())
        {
            if (counter.isDrop())
            {
                drops.add(counter);
            }
        }
        return drops.toArray(new DataplaneCounter[0]);
    }
}
