package io.netreduce.controlplane.metrics;

import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.snapshots.ClassicHistogramBuckets;
import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Bridges a {@link MetricsSource} into a Prometheus registry: at each scrape it asks the source for its samples
 * and builds the client library's snapshots, grouped into families by name. The exposition is then done by the
 * library's own writer, never by hand. A sample that contradicts its family (another type, or invalid names) is
 * left out and logged, so one bad metric cannot break the whole scrape.
 */
public final class SnapshotCollector implements MultiCollector
{
    private static final Logger LOG = LoggerFactory.getLogger(SnapshotCollector.class);
    private static final String TOTAL = "_total";

    private final MetricsSource source;

    /**
     * @param source where the samples come from.
     */
    public SnapshotCollector(final MetricsSource source)
    {
        this.source = source;
    }

    @Override
    public MetricSnapshots collect()
    {
        final Families families = new Families();
        source.collect(families);
        return families.snapshots();
    }

    private enum Kind
    {
        COUNTER, GAUGE, HISTOGRAM
    }

    private static final class Family
    {
        final Kind kind;
        final String help;
        final List<Object> points = new ArrayList<>();

        Family(final Kind kind, final String help)
        {
            this.kind = kind;
            this.help = help;
        }
    }

    private static final class Families implements MetricsSink
    {
        private final Map<String, Family> families = new LinkedHashMap<>();

        @Override
        public void counter(final String name, final String help, final double value, final String... labels)
        {
            final String base = name.endsWith(TOTAL) ? name.substring(0, name.length() - TOTAL.length()) : name;
            add(base, Kind.COUNTER, help, labels, () -> CounterSnapshot.CounterDataPointSnapshot.builder()
                .value(value).labels(Labels.of(labels)).build());
        }

        @Override
        public void gauge(final String name, final String help, final double value, final String... labels)
        {
            add(name, Kind.GAUGE, help, labels, () -> GaugeSnapshot.GaugeDataPointSnapshot.builder()
                .value(value).labels(Labels.of(labels)).build());
        }

        @Override
        public void histogram(
            final String name,
            final String help,
            final double[] upperBounds,
            final long[] bucketCounts,
            final double sum,
            final String... labels)
        {
            add(name, Kind.HISTOGRAM, help, labels, () -> HistogramSnapshot.HistogramDataPointSnapshot.builder()
                .classicHistogramBuckets(ClassicHistogramBuckets.of(upperBounds, bucketCounts))
                .sum(sum)
                .labels(Labels.of(labels))
                .build());
        }

        private void add(
            final String name,
            final Kind kind,
            final String help,
            final String[] labels,
            final java.util.function.Supplier<Object> point)
        {
            final Family family = families.computeIfAbsent(name, ignored -> new Family(kind, help));
            if (family.kind != kind)
            {
                LOG.warn("metric {} reported as {} and {}; the {} sample is left out", name, family.kind, kind, kind);
                return;
            }
            try
            {
                family.points.add(point.get());
            }
            catch (final IllegalArgumentException ex)
            {
                LOG.warn("metric {} {} left out: {}", name, String.join(",", labels), ex.getMessage());
            }
        }

        MetricSnapshots snapshots()
        {
            final List<MetricSnapshot> snapshots = new ArrayList<>();
            for (final Map.Entry<String, Family> entry : families.entrySet())
            {
                final Family family = entry.getValue();
                if (family.points.isEmpty())
                {
                    continue;
                }
                try
                {
                    snapshots.add(build(entry.getKey(), family));
                }
                catch (final IllegalArgumentException ex)
                {
                    LOG.warn("metric family {} left out: {}", entry.getKey(), ex.getMessage());
                }
            }
            return new MetricSnapshots(snapshots);
        }

        private static MetricSnapshot build(final String name, final Family family)
        {
            switch (family.kind)
            {
                case COUNTER:
                {
                    final CounterSnapshot.Builder builder = CounterSnapshot.builder().name(name).help(family.help);
                    family.points.forEach(point -> builder.dataPoint((CounterSnapshot.CounterDataPointSnapshot)point));
                    return builder.build();
                }
                case GAUGE:
                {
                    final GaugeSnapshot.Builder builder = GaugeSnapshot.builder().name(name).help(family.help);
                    family.points.forEach(point -> builder.dataPoint((GaugeSnapshot.GaugeDataPointSnapshot)point));
                    return builder.build();
                }
                default:
                {
                    final HistogramSnapshot.Builder builder = HistogramSnapshot.builder().name(name).help(family.help);
                    family.points.forEach(
                        point -> builder.dataPoint((HistogramSnapshot.HistogramDataPointSnapshot)point));
                    return builder.build();
                }
            }
        }
    }
}
