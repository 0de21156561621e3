package io.netreduce.worker;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class LoadGenCommandTest
{
    @Test
    void readsUtimeAndStimeAfterACommandNameWithSpacesAndParentheses()
    {
        final String stat = "4242 (netreduce-datap (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 " +
            "123 45 0 0 20 0 30 0 100 5000000 3000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        final long[] ticks = new long[4];
        LoadGenCommand.parseProcessTicks(stat, ticks, 2);
        assertEquals(123, ticks[2]);
        assertEquals(45, ticks[3]);
    }

    @Test
    void readsThisProcessFromProc() throws Exception
    {
        final long[] ticks = new long[2];
        LoadGenCommand.parseProcessTicks(Files.readString(Path.of("/proc/self/stat")), ticks, 0);
        assertTrue(ticks[0] >= 0 && ticks[1] >= 0);
        assertTrue(ticks[0] + ticks[1] > 0, "a JVM that ran tests has used some CPU");
    }
}
