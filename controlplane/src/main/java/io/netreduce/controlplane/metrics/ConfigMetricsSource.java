package io.netreduce.controlplane.metrics;

import io.netreduce.controlplane.config.JobConfig;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.RingConfig;

import java.util.function.Supplier;

/**
 * Metrics about the running configuration: jobs, rings, their world size and budgeted aggregator memory, and the
 * memory budget. Read from the configuration at scrape time, so reloads show up without re-registration.
 */
public final class ConfigMetricsSource implements MetricsSource
{
    private final Supplier<NetreduceConfig> config;

    /**
     * @param config supplies the running configuration.
     */
    public ConfigMetricsSource(final Supplier<NetreduceConfig> config)
    {
        this.config = config;
    }

    @Override
    public void collect(final MetricsSink sink)
    {
        final NetreduceConfig current = config.get();
        sink.gauge("netreduce_jobs", "Jobs configured.", current.jobs().size());
        sink.gauge("netreduce_memory_budget_bytes", "Aggregator memory budget.", current.appliance().memoryBudget());
        sink.gauge("netreduce_aggregator_budgeted_bytes", "Aggregator memory budgeted for all rings.",
            current.aggregatorBytes());
        for (final JobConfig job : current.jobs())
        {
            for (final RingConfig ring : job.rings())
            {
                final String id = Integer.toString(ring.id());
                sink.gauge("netreduce_ring_world_size", "Ranks in the ring.", ring.worldSize(),
                    "job", job.name(), "ring", id);
                sink.gauge("netreduce_ring_aggregator_bytes", "Aggregator memory budgeted for the ring.",
                    ring.aggregatorBytes(), "job", job.name(), "ring", id);
            }
        }
    }
}
