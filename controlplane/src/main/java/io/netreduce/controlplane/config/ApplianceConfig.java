package io.netreduce.controlplane.config;

import io.netreduce.dataplane.agent.DataplaneContext;

import java.util.List;

/**
 * The appliance-wide part of the configuration. Changing it needs a restart; jobs can change live.
 *
 * @param ports        the ports the dataplane attaches to.
 * @param dataplane    idle strategy, batch size, command queue.
 * @param memoryBudget bytes of aggregator memory all rings together may use.
 * @param api          where the control API listens.
 * @param metrics      where the Prometheus endpoint listens.
 * @param logLevel     the root log level.
 * @param captureDirectory where API-requested pcap captures are written; a capture file outside it is refused.
 * @param apiTokenFile the file holding the control API's bearer token (required when the API listens on TCP;
 *                     created with a random token, owner-only, if missing); null on a Unix socket.
 * @param name         this appliance's name in multi-rack topologies ({@code appliance.name}, or the daemon's
 *                     {@code --name}): it picks the appliance's role (a rack's leaf or the spine) in every
 *                     multi-rack ring; null if unnamed (such an appliance installs flat rings only).
 * @param switchml     the appliance's SwitchML address and controller; null if it serves no SwitchML job.
 */
public record ApplianceConfig(
    List<PortConfig> ports,
    DataplaneConfig dataplane,
    long memoryBudget,
    ListenAddress api,
    ListenAddress metrics,
    LogLevel logLevel,
    String captureDirectory,
    String apiTokenFile,
    @com.fasterxml.jackson.annotation.JsonInclude(com.fasterxml.jackson.annotation.JsonInclude.Include.NON_NULL)
    String name,
    @com.fasterxml.jackson.annotation.JsonInclude(com.fasterxml.jackson.annotation.JsonInclude.Include.NON_NULL)
    SwitchMlApplianceConfig switchml)
{
    /** Default memory budget in bytes: the dataplane's own default (1 GiB). */
    public static final long DEFAULT_MEMORY_BUDGET = DataplaneContext.DEFAULT_MEMORY_BUDGET;
    /**
     * Default control API address: a Unix socket only the daemon's user can open (mode 0600, in a 0700 directory),
     * so no other local user and no web page can reach it.
     */
    public static final String DEFAULT_API_LISTEN = "unix:/run/netreduce/api.sock";
    /** Default metrics address: loopback only. */
    public static final String DEFAULT_METRICS_LISTEN = "127.0.0.1:9741";
    /** Default log level. */
    public static final LogLevel DEFAULT_LOG_LEVEL = LogLevel.INFO;
    /** Default capture directory (created when the first capture starts). */
    public static final String DEFAULT_CAPTURE_DIRECTORY = "/var/lib/netreduce/captures";

    /**
     * Canonical constructor: copies the port list so the record is immutable.
     */
    public ApplianceConfig
    {
        ports = List.copyOf(ports);
    }

    /**
     * An appliance that serves no SwitchML job.
     */
    public ApplianceConfig(
        final List<PortConfig> ports,
        final DataplaneConfig dataplane,
        final long memoryBudget,
        final ListenAddress api,
        final ListenAddress metrics,
        final LogLevel logLevel,
        final String captureDirectory,
        final String apiTokenFile,
        final String name)
    {
        this(ports, dataplane, memoryBudget, api, metrics, logLevel, captureDirectory, apiTokenFile, name, null);
    }

    /**
     * An appliance with the default capture directory.
     */
    public ApplianceConfig(
        final List<PortConfig> ports,
        final DataplaneConfig dataplane,
        final long memoryBudget,
        final ListenAddress api,
        final ListenAddress metrics,
        final LogLevel logLevel)
    {
        this(ports, dataplane, memoryBudget, api, metrics, logLevel, DEFAULT_CAPTURE_DIRECTORY, null, null);
    }

    /**
     * An appliance without an API token file.
     */
    public ApplianceConfig(
        final List<PortConfig> ports,
        final DataplaneConfig dataplane,
        final long memoryBudget,
        final ListenAddress api,
        final ListenAddress metrics,
        final LogLevel logLevel,
        final String captureDirectory)
    {
        this(ports, dataplane, memoryBudget, api, metrics, logLevel, captureDirectory, null, null);
    }

    /**
     * An unnamed appliance.
     */
    public ApplianceConfig(
        final List<PortConfig> ports,
        final DataplaneConfig dataplane,
        final long memoryBudget,
        final ListenAddress api,
        final ListenAddress metrics,
        final LogLevel logLevel,
        final String captureDirectory,
        final String apiTokenFile)
    {
        this(ports, dataplane, memoryBudget, api, metrics, logLevel, captureDirectory, apiTokenFile, null);
    }

    /**
     * @param newName the name to take (e.g. from the daemon's {@code --name}).
     * @return this appliance under another name.
     */
    public ApplianceConfig withName(final String newName)
    {
        return new ApplianceConfig(ports, dataplane, memoryBudget, api, metrics, logLevel, captureDirectory,
            apiTokenFile, newName, switchml);
    }
}
