package io.netreduce.controlplane.config;

import com.fasterxml.jackson.annotation.JsonValue;

import java.util.Locale;

/**
 * The root log level of the daemon.
 */
public enum LogLevel
{
    TRACE, DEBUG, INFO, WARN, ERROR;

    /**
     * @return the lower-case name used in the configuration.
     */
    @JsonValue
    public String configName()
    {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * @param name a level name in any case.
     * @return the level or null if the name is not one.
     */
    public static LogLevel fromConfigName(final String name)
    {
        for (final LogLevel level : values())
        {
            if (level.name().equalsIgnoreCase(name))
            {
                return level;
            }
        }
        return null;
    }
}
