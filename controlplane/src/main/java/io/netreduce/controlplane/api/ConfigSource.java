package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.ConfigException;
import io.netreduce.controlplane.config.NetreduceConfig;

/**
 * Where a reload reads the configuration from, normally the file the daemon was started with.
 */
@FunctionalInterface
public interface ConfigSource
{
    /**
     * @return the configuration, validated.
     * @throws ConfigException listing every error.
     */
    NetreduceConfig load() throws ConfigException;
}
