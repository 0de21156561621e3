package io.netreduce.controlplane.metrics;

import java.util.List;

/**
 * Something that publishes metrics, read at scrape time: the dataplane's counters and histograms (which it
 * writes off-heap or atomically and anyone may read), the running configuration, and so on. Called on the
 * metrics endpoint's thread, never on the packet path.
 */
@FunctionalInterface
public interface MetricsSource
{
    /**
     * @param sink where to report the current values.
     */
    void collect(MetricsSink sink);

    /**
     * @param sources sources to read one after the other.
     * @return a source reporting what all of them report.
     */
    static MetricsSource composite(final List<MetricsSource> sources)
    {
        final List<MetricsSource> copy = List.copyOf(sources);
        return sink -> copy.forEach(source -> source.collect(sink));
    }
}
