package io.netreduce.controlplane.config;

import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Parses and prints sizes such as {@code 512MiB}, {@code 2GiB}, {@code 64KiB} or a plain byte count.
 * Binary units only (KiB, MiB, GiB, TiB; K/M/G/T are accepted as the same), so there is no 1000-vs-1024 doubt.
 */
public final class ByteSize
{
    private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*([KMGT]i?B?|B)?", Pattern.CASE_INSENSITIVE);

    private ByteSize()
    {
    }

    /**
     * @param text the size text.
     * @return the size in bytes.
     * @throws IllegalArgumentException with an operator-facing reason if the text is not a size.
     */
    public static long parse(final String text)
    {
        final Matcher matcher = SIZE.matcher(text.trim());
        if (!matcher.matches())
        {
            throw new IllegalArgumentException("'" + text + "' is not a size like 512MiB, 2GiB or 1048576");
        }
        final long number;
        try
        {
            number = Long.parseLong(matcher.group(1));
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("'" + text + "' is too large");
        }
        final String unit = matcher.group(2) == null ? "B" : matcher.group(2).toUpperCase(Locale.ROOT);
        final int shift = switch (unit.charAt(0))
        {
            case 'K' -> 10;
            case 'M' -> 20;
            case 'G' -> 30;
            case 'T' -> 40;
            default -> 0;
        };
        if (number > (Long.MAX_VALUE >> shift))
        {
            throw new IllegalArgumentException("'" + text + "' is too large");
        }
        return number << shift;
    }

    /**
     * @param bytes a size in bytes.
     * @return the size in the largest binary unit that divides it exactly, e.g. {@code 512MiB}.
     */
    public static String format(final long bytes)
    {
        final String[] units = { "TiB", "GiB", "MiB", "KiB" };
        final int[] shifts = { 40, 30, 20, 10 };
        for (int i = 0; i < units.length; i++)
        {
            final long unit = 1L << shifts[i];
            if (bytes >= unit && bytes % unit == 0)
            {
                return (bytes >> shifts[i]) + units[i];
            }
        }
        return bytes + "B";
    }

    /**
     * @param bytes a size.
     * @return the size with one decimal in the largest binary unit not above it, e.g. {@code 1.5GiB}.
     */
    public static String human(final long bytes)
    {
        final String[] units = { "TiB", "GiB", "MiB", "KiB" };
        final int[] shifts = { 40, 30, 20, 10 };
        for (int i = 0; i < units.length; i++)
        {
            if (bytes >= (1L << shifts[i]))
            {
                final double value = (double)bytes / (1L << shifts[i]);
                return bytes % (1L << shifts[i]) == 0 ? (bytes >> shifts[i]) + units[i] :
                    String.format(Locale.ROOT, "%.1f%s", value, units[i]);
            }
        }
        return bytes + "B";
    }
}
