package io.netreduce.controlplane.config;

import java.util.List;

/**
 * A configuration was refused. Carries every error found, not just the first, so an operator fixes them in one go.
 */
public final class ConfigException extends Exception
{
    private final List<ConfigError> errors;

    /**
     * @param errors the errors found; at least one.
     */
    public ConfigException(final List<ConfigError> errors)
    {
        super(describe(errors));
        this.errors = List.copyOf(errors);
    }

    /**
     * @return every error, in document order.
     */
    public List<ConfigError> errors()
    {
        return errors;
    }

    private static String describe(final List<ConfigError> errors)
    {
        final StringBuilder text = new StringBuilder();
        text.append(errors.size()).append(errors.size() == 1 ? " configuration error" : " configuration errors");
        for (final ConfigError error : errors)
        {
            text.append(System.lineSeparator()).append("  ").append(error);
        }
        return text.toString();
    }
}
