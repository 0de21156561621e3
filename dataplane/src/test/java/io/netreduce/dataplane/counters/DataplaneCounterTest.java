package io.netreduce.dataplane.counters;

import io.netreduce.dataplane.agent.DataplaneContext;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What the counters' descriptions (shown by {@code ctl counters}, {@code /v1/counters} and as {@code /metrics}
 * HELP) tell an operator must be true of this build.
 */
class DataplaneCounterTest
{
    private static final Path ROOT = Path.of(System.getProperty("netreduce.repo.root", "..")).toAbsolutePath().normalize();
    private static final Pattern SETTING = Pattern.compile("\\b(?:appliance\\.)?(dataplane\\.[A-Za-z]+)\\b");

    @Test
    void shouldNameOnlySettingsThatDocsConfigurationDocuments() throws Exception
    {
        final String configuration = Files.readString(ROOT.resolve("docs/configuration.md"));
        int named = 0;
        for (final DataplaneCounter counter : DataplaneCounter.values())
        {
            final Matcher setting = SETTING.matcher(counter.label());
            while (setting.find())
            {
                named++;
                assertThat(configuration).as("%s names %s", counter, setting.group(1))
                    .contains("| `" + setting.group(1) + "` |");
            }
        }
        assertThat(named).as("settings named in descriptions (dropProbability, the CLT's foreign share)")
            .isGreaterThanOrEqualTo(3);
    }

    @Test
    void shouldStateTheForeignIdleTimeTheDataplaneUses()
    {
        // issue 29: the description named a setting for this time, and there is none: it is a constant.
        final long seconds = TimeUnit.NANOSECONDS.toSeconds(DataplaneContext.DEFAULT_FOREIGN_IDLE_NS);
        assertThat(DataplaneCounter.CLT_FOREIGN_EXPIRED.label())
            .contains("after " + seconds + " s without a packet")
            .contains("not a setting");
    }
}
