package io.netreduce.daemon;

import io.netreduce.controlplane.api.ApplianceControl;
import io.netreduce.controlplane.api.ConfiguredAppliance;
import io.netreduce.controlplane.api.RingInstaller;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.metrics.MetricsSource;

/**
 * The seam where the dataplane plugs into the daemon: it receives ring changes, publishes metrics, and answers the
 * API's dataplane queries (tables, counters, occupancy, latency, captures) by wrapping the configured appliance.
 * {@link #NONE} is a control plane without a dataplane: jobs and reloads work, dataplane queries answer 501.
 */
public interface DataplaneAttachment extends AutoCloseable
{
    /** No dataplane. */
    DataplaneAttachment NONE = new DataplaneAttachment()
    {
        @Override
        public RingInstaller installer()
        {
            return RingInstaller.NONE;
        }

        @Override
        public MetricsSource metrics()
        {
            return sink -> { };
        }

        @Override
        public ApplianceControl control(final ConfiguredAppliance configured)
        {
            return configured;
        }

        @Override
        public void close()
        {
        }
    };

    /**
     * Called once before the configuration is applied.
     *
     * @param config the configuration the daemon starts with (ports, idle strategy, queue capacity).
     */
    default void start(final NetreduceConfig config)
    {
    }

    /**
     * @return where validated ring changes go (commands on the dataplane's bounded queue).
     */
    RingInstaller installer();

    /**
     * @return the dataplane's counters and histograms, read at scrape time.
     */
    MetricsSource metrics();

    /**
     * @param configured the configuration side of the appliance.
     * @return the control the API serves: the configured appliance plus dataplane queries.
     */
    ApplianceControl control(ConfiguredAppliance configured);

    /**
     * Stop intake, finish the current batch, close the ports.
     */
    @Override
    void close();
}
