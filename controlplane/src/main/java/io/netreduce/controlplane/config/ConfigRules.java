package io.netreduce.controlplane.config;

import java.util.regex.Pattern;

/**
 * Rules more than one section of a configuration follows (names, ring ids, ranges), shared by the validators.
 */
final class ConfigRules
{
    /** Job names appear in API paths and metric labels, so they are kept to a URL- and label-safe alphabet. */
    private static final Pattern JOB_NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9_.-]{0,63}");
    /** What a job or appliance name may be, for the error messages. */
    static final String NAME_RULE =
        "must be 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit";

    private ConfigRules()
    {
    }

    /**
     * @return whether {@code name} may name a job, an appliance, a spine or a leaf ({@link #NAME_RULE}).
     */
    static boolean isName(final String name)
    {
        return JOB_NAME.matcher(name).matches();
    }

    static boolean isRingIdValid(final int id)
    {
        return id >= 0 && id <= RingConfig.MAX_ID;
    }

    /**
     * Report {@code value} at {@code path} unless it is in {@code min..max}.
     */
    static void range(final ErrorCollector errors, final int value, final int min, final int max, final String path)
    {
        if (value < min || value > max)
        {
            errors.add(path, value + " is not in " + min + ".." + max);
        }
    }
}
