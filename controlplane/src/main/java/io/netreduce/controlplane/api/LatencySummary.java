package io.netreduce.controlplane.api;

/**
 * Percentiles of one latency histogram, in nanoseconds.
 *
 * @param name   what is measured, e.g. {@code aggregation} (first packet in to result out).
 * @param job    the job, or null for appliance-wide histograms.
 * @param ringId the ring, or -1 for appliance-wide histograms.
 * @param count  samples recorded.
 * @param p50    median.
 * @param p90    90th percentile.
 * @param p99    99th percentile.
 * @param p999   99.9th percentile.
 * @param max    largest sample.
 */
public record LatencySummary(
    String name, String job, int ringId, long count, long p50, long p90, long p99, long p999, long max)
{
}
