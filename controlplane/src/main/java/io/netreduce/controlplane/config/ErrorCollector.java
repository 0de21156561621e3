package io.netreduce.controlplane.config;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Collects configuration errors in the order found. Only the first error at a path is kept: a value that could
 * not be read is reported once, not again by every check that then sees its placeholder.
 */
final class ErrorCollector
{
    private final List<ConfigError> errors = new ArrayList<>();
    private final Set<String> paths = new HashSet<>();

    void add(final String path, final String message)
    {
        if (!hasErrorAtOrAbove(path) && paths.add(path))
        {
            errors.add(new ConfigError(path, message));
        }
    }

    boolean hasErrorAt(final String path)
    {
        return paths.contains(path);
    }

    /**
     * True if the path or one of its ancestors (e.g. {@code jobs[0]} for {@code jobs[0].rings}) has an error.
     */
    private boolean hasErrorAtOrAbove(final String path)
    {
        if (paths.contains(path))
        {
            return true;
        }
        for (int i = 0; i < path.length(); i++)
        {
            final char c = path.charAt(i);
            if ((c == '.' || c == '[') && paths.contains(path.substring(0, i)))
            {
                return true;
            }
        }
        return false;
    }

    boolean isEmpty()
    {
        return errors.isEmpty();
    }

    List<ConfigError> errors()
    {
        return List.copyOf(errors);
    }

    static String child(final String path, final String key)
    {
        return path.isEmpty() ? key : path + "." + key;
    }

    static String index(final String path, final int index)
    {
        return path + "[" + index + "]";
    }
}
