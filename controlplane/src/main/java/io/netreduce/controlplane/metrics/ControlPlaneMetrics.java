package io.netreduce.controlplane.metrics;

import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;

/**
 * The control plane's own metrics, kept in the client library's counters: configuration reloads by result.
 */
public final class ControlPlaneMetrics
{
    private final Counter reloads;

    /**
     * @param registry the registry to register with.
     */
    public ControlPlaneMetrics(final PrometheusRegistry registry)
    {
        reloads = Counter.builder()
            .name("netreduce_config_reloads")
            .help("Configuration reloads (SIGHUP or API) by result.")
            .labelNames("result")
            .register(registry);
        // Publish both series from the start so a rate() over them works before the first reload.
        reloads.labelValues("applied").inc(0);
        reloads.labelValues("refused").inc(0);
    }

    /**
     * Count a reload that was applied.
     */
    public void reloadApplied()
    {
        reloads.labelValues("applied").inc();
    }

    /**
     * Count a reload refused because the new configuration was invalid.
     */
    public void reloadRefused()
    {
        reloads.labelValues("refused").inc();
    }

    /**
     * Build a registry with the control plane's metrics and a source's samples.
     *
     * @param source the dataplane's (and configuration's) metrics.
     * @return the registry.
     */
    public static PrometheusRegistry registryWith(final MetricsSource source)
    {
        final PrometheusRegistry registry = new PrometheusRegistry();
        registry.register(new SnapshotCollector(source));
        return registry;
    }
}
