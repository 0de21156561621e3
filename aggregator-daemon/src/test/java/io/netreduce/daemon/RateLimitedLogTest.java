package io.netreduce.daemon;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class RateLimitedLogTest
{
    @Test
    void shouldLimitEachSourceAndBoundTheSourcesItTracks()
    {
        final long[] now = { 0 };
        final List<String> lines = new ArrayList<>();
        final RateLimitedLog log = new RateLimitedLog(2, 100, 3, () -> now[0], lines::add,
            (source, suppressed) -> source + ":" + suppressed);
        int admitted = 0;
        for (int i = 0; i < 50; i++)
        {
            // 50 sources, 10 lines each: three sources tracked, every other one shares a limit.
            for (int j = 0; j < 10; j++)
            {
                admitted += log.admit("s" + i) ? 1 : 0;
            }
        }
        assertThat(admitted).as("two lines for each of three sources and two for all the others").isEqualTo(8);
        now[0] = 99;
        log.flush();
        assertThat(lines).isEmpty();
        now[0] = 100;
        log.flush();
        assertThat(lines).containsExactly("s0:8", "s1:8", "s2:8", RateLimitedLog.OTHER_SOURCES + ":468");
        lines.clear();
        assertThat(log.admit("s40")).as("a new window").isTrue();
    }
}
