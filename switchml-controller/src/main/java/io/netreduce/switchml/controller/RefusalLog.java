package io.netreduce.switchml.controller;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * The controller's refusals, logged so that a caller cannot flood the log: at most {@link #LINES_PER_PEER} lines per
 * peer address a minute; the rest are counted, and the next refusal after the minute (from any peer) first logs how
 * many of that peer's were not. At most {@link #MAX_PEERS} peers are tracked; beyond them, peers share one limit.
 * Thread-safe.
 */
final class RefusalLog
{
    static final int LINES_PER_PEER = 5;
    static final long WINDOW_NS = TimeUnit.SECONDS.toNanos(60);
    static final int MAX_PEERS = 1024;
    private static final String OTHER_PEERS = "other peers";

    private static final class Window
    {
        final long startNs;
        int logged;
        long suppressed;

        Window(final long startNs)
        {
            this.startNs = startNs;
        }
    }

    private final LongSupplier clock;
    private final Consumer<String> out;
    private final Map<String, Window> windows = new LinkedHashMap<>();

    RefusalLog(final LongSupplier clock, final Consumer<String> out)
    {
        this.clock = clock;
        this.out = out;
    }

    /**
     * Log a refusal of {@code peer}'s call, unless that peer has had its lines this minute.
     */
    synchronized void refused(final InetSocketAddress peer, final Supplier<String> line)
    {
        final long now = clock.getAsLong();
        for (final Iterator<Map.Entry<String, Window>> it = windows.entrySet().iterator(); it.hasNext(); )
        {
            final Map.Entry<String, Window> entry = it.next();
            if (now - entry.getValue().startNs >= WINDOW_NS)
            {
                if (entry.getValue().suppressed > 0)
                {
                    out.accept("SwitchML controller: " + entry.getValue().suppressed + " more refused call(s) from " +
                        entry.getKey() + " in the last " + TimeUnit.NANOSECONDS.toSeconds(WINDOW_NS) +
                        " s were not logged one by one");
                }
                it.remove();
            }
        }
        final InetAddress address = peer == null ? null : peer.getAddress();
        String key = address == null ? "an unknown peer" : address.getHostAddress();
        if (!windows.containsKey(key) && windows.size() >= MAX_PEERS)
        {
            key = OTHER_PEERS;
        }
        final Window window = windows.computeIfAbsent(key, k -> new Window(now));
        if (window.logged < LINES_PER_PEER)
        {
            window.logged++;
            out.accept(line.get());
        }
        else
        {
            window.suppressed++;
        }
    }
}
