package io.netreduce.daemon;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * A log that a stranger cannot flood: at most {@code linesPerWindow} lines per source in a window (which begins with
 * the source's first line), the rest counted; when the window ends, one line says how many were suppressed, and the
 * source may log again. Sources are whatever the caller keys by (an address); at most {@code maxSources} are
 * tracked, the rest share one key ({@link #OTHER_SOURCES}), so the tracking itself is bounded.
 * <p>
 * Used off the dataplane: the lines' sources are frames, but the dataplane only posts events; the threads that drain
 * them log. Thread-safe (synchronized: one drain thread calls it in practice).
 */
final class RateLimitedLog
{
    /** The key of every source beyond {@code maxSources}. */
    static final String OTHER_SOURCES = "other sources";

    /**
     * What the line about a window's suppressed lines says.
     */
    @FunctionalInterface
    interface Summary
    {
        String line(String source, long suppressed);
    }

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

    private final int linesPerWindow;
    private final long windowNs;
    private final int maxSources;
    private final LongSupplier clock;
    private final Consumer<String> out;
    private final Summary summary;
    private final Map<String, Window> windows = new LinkedHashMap<>();

    RateLimitedLog(
        final int linesPerWindow,
        final long windowNs,
        final int maxSources,
        final LongSupplier clock,
        final Consumer<String> out,
        final Summary summary)
    {
        if (linesPerWindow < 1 || windowNs <= 0 || maxSources < 1)
        {
            throw new IllegalArgumentException("lines per window, window and sources must be positive");
        }
        this.linesPerWindow = linesPerWindow;
        this.windowNs = windowNs;
        this.maxSources = maxSources;
        this.clock = clock;
        this.out = out;
        this.summary = summary;
    }

    /**
     * Whether a line from {@code source} may be logged now; if not, it is counted as suppressed. A window that has
     * ended is closed first (its summary logged).
     */
    synchronized boolean admit(final String source)
    {
        final long now = clock.getAsLong();
        String key = source;
        Window window = windows.get(key);
        if (window == null && windows.size() >= maxSources)
        {
            key = OTHER_SOURCES;
            window = windows.get(key);
        }
        if (window != null && now - window.startNs >= windowNs)
        {
            close(key, window);
            windows.remove(key);
            window = null;
        }
        if (window == null)
        {
            window = new Window(now);
            windows.put(key, window);
        }
        if (window.logged < linesPerWindow)
        {
            window.logged++;
            return true;
        }
        window.suppressed++;
        return false;
    }

    /**
     * Close every window that has ended, logging how many lines each suppressed (nothing for none).
     */
    synchronized void flush()
    {
        final long now = clock.getAsLong();
        for (final Iterator<Map.Entry<String, Window>> it = windows.entrySet().iterator(); it.hasNext(); )
        {
            final Map.Entry<String, Window> entry = it.next();
            if (now - entry.getValue().startNs >= windowNs)
            {
                close(entry.getKey(), entry.getValue());
                it.remove();
            }
        }
    }

    private void close(final String source, final Window window)
    {
        if (window.suppressed > 0)
        {
            out.accept(summary.line(source, window.suppressed));
        }
    }
}
