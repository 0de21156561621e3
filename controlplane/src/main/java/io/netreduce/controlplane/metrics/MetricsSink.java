package io.netreduce.controlplane.metrics;

/**
 * Receives one scrape's worth of samples from a {@link MetricsSource}. Labels are given as name/value pairs,
 * e.g. {@code "job", "bert", "ring", "10"}; every sample of one metric name must use the same label names.
 */
public interface MetricsSink
{
    /**
     * A monotonically increasing count.
     *
     * @param name   the metric name without the {@code _total} suffix (the exposition adds it).
     * @param help   one line describing the metric.
     * @param value  the current count.
     * @param labels label name/value pairs.
     */
    void counter(String name, String help, double value, String... labels);

    /**
     * A value that goes up and down.
     *
     * @param name   the metric name.
     * @param help   one line describing the metric.
     * @param value  the current value.
     * @param labels label name/value pairs.
     */
    void gauge(String name, String help, double value, String... labels);

    /**
     * A histogram with fixed buckets.
     *
     * @param name         the metric name.
     * @param help         one line describing the metric.
     * @param upperBounds  bucket upper bounds, increasing; the last must be {@code Double.POSITIVE_INFINITY}.
     * @param bucketCounts observations per bucket (not cumulative), same length as upperBounds.
     * @param sum          the sum of all observations.
     * @param labels       label name/value pairs.
     */
    void histogram(String name, String help, double[] upperBounds, long[] bucketCounts, double sum, String... labels);
}
