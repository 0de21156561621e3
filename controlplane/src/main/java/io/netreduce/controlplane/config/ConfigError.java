package io.netreduce.controlplane.config;

/**
 * One problem found in a configuration, located by its path, e.g.
 * {@code jobs[1].rings[0].members[3].ip: not an IPv4 or IPv6 address}.
 *
 * @param path    where in the document, dotted keys and [index]; empty for the document itself.
 * @param message what is wrong, phrased for an operator.
 */
public record ConfigError(String path, String message)
{
    @Override
    public String toString()
    {
        return path.isEmpty() ? message : path + ": " + message;
    }
}
