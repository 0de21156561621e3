package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.ConfigException;

/**
 * Told the outcome of every reload, whether it came from SIGHUP or the API (for metrics and logs).
 */
public interface ReloadObserver
{
    /** Ignores reloads. */
    ReloadObserver NONE = new ReloadObserver()
    {
        @Override
        public void applied(final ReloadResult result)
        {
        }

        @Override
        public void refused(final ConfigException error)
        {
        }
    };

    /**
     * @param result what the reload changed.
     */
    void applied(ReloadResult result);

    /**
     * @param error why the new configuration was refused; the running one stays.
     */
    void refused(ConfigException error);
}
