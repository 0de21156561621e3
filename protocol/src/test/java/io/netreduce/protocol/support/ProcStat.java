package io.netreduce.protocol.support;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Fields of a task's {@code /proc/.../stat} line (proc(5)), for tests that check what the kernel says about a thread.
 */
public final class ProcStat
{
    /** proc(5)'s number of the nice field. */
    private static final int NICE = 19;

    private ProcStat()
    {
    }

    /**
     * @param task a task directory, e.g. {@code /proc/self/task/TID}.
     * @return its nice value.
     */
    public static int nice(final Path task)
    {
        try
        {
            return Integer.parseInt(field(Files.readString(task.resolve("stat")), NICE));
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    /**
     * @return field {@code number} (numbered from 1, as proc(5) does) of a stat line, counted after the command name,
     *         which may hold spaces and parentheses.
     */
    public static String field(final String stat, final int number)
    {
        // Field 2 is "(comm)"; field 3 starts two characters after its last ')'.
        return stat.substring(stat.lastIndexOf(')') + 2).split(" ")[number - 3];
    }
}
