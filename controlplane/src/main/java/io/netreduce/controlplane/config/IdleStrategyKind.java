package io.netreduce.controlplane.config;

import com.fasterxml.jackson.annotation.JsonValue;

/**
 * How a dataplane lane waits when a duty cycle found no work (maps onto Agrona idle strategies).
 */
public enum IdleStrategyKind
{
    BUSY_SPIN("busy-spin"),
    YIELD("yield"),
    BACKOFF("backoff"),
    SLEEP("sleep"),
    /** Spin, yield, then block in poll(2) on the ports' sockets until a frame arrives (at most 1 ms). */
    POLL("poll");

    private final String configName;

    IdleStrategyKind(final String configName)
    {
        this.configName = configName;
    }

    /**
     * @return the name used in the YAML configuration.
     */
    @JsonValue
    public String configName()
    {
        return configName;
    }

    /**
     * @param name the configuration name, e.g. {@code busy-spin}.
     * @return the kind or null if the name is not one.
     */
    public static IdleStrategyKind fromConfigName(final String name)
    {
        for (final IdleStrategyKind kind : values())
        {
            if (kind.configName.equals(name))
            {
                return kind;
            }
        }
        return null;
    }
}
