package io.netreduce.controlplane.config;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class ConfigDiffTest
{
    private static NetreduceConfig parse(final String yaml)
    {
        try
        {
            return ConfigLoader.parse(yaml);
        }
        catch (final ConfigException ex)
        {
            throw new AssertionError(ex.getMessage(), ex);
        }
    }

    private static final NetreduceConfig BASE = parse(ConfigLoaderTest.BASE);

    private static String ringKey(final RingRef ref)
    {
        return ref.job() + "/" + ref.ring().id();
    }

    @Test
    void shouldFindNothingBetweenEqualConfigs()
    {
        final ConfigDiff diff = ConfigDiff.between(BASE, parse(ConfigLoaderTest.BASE));

        assertThat(diff.isEmpty()).isTrue();
        assertThat(diff.applianceChanged()).isFalse();
        assertThat(diff.ringsUnchanged()).extracting(ConfigDiffTest::ringKey).containsExactly("a/1", "b/2");
    }

    @Test
    void shouldRemoveAndAddAChangedRingAndLeaveTheOtherAlone()
    {
        final NetreduceConfig changed = parse(ConfigLoaderTest.BASE.replace("window: 4", "window: 8"));

        final ConfigDiff diff = ConfigDiff.between(BASE, changed);

        assertThat(diff.ringsRemoved()).extracting(ConfigDiffTest::ringKey).containsExactly("b/2");
        assertThat(diff.ringsRemoved().getFirst().ring().window()).isEqualTo(4);
        assertThat(diff.ringsAdded()).extracting(ConfigDiffTest::ringKey).containsExactly("b/2");
        assertThat(diff.ringsAdded().getFirst().ring().window()).isEqualTo(8);
        assertThat(diff.ringsChanged()).extracting(ConfigDiffTest::ringKey).containsExactly("b/2");
        assertThat(diff.ringsUnchanged()).extracting(ConfigDiffTest::ringKey).containsExactly("a/1");
        assertThat(diff.jobsAdded()).isEmpty();
        assertThat(diff.jobsRemoved()).isEmpty();
    }

    @Test
    void shouldTreatAMemberChangeAsARingChange()
    {
        final NetreduceConfig changed = parse(ConfigLoaderTest.BASE.replace("ip: 10.0.0.3", "ip: 10.0.0.33"));

        final ConfigDiff diff = ConfigDiff.between(BASE, changed);

        assertThat(diff.ringsChanged()).extracting(ConfigDiffTest::ringKey).containsExactly("a/1");
        assertThat(diff.ringsUnchanged()).extracting(ConfigDiffTest::ringKey).containsExactly("b/2");
    }

    @Test
    void shouldAddAndRemoveWholeJobs()
    {
        final NetreduceConfig withoutB = BASE.withoutJob("b");
        final JobConfig c = new JobConfig("c", BASE.job("b").orElseThrow().rings().stream()
            .map(ring -> new RingConfig(3, ring.elementType(), ring.window(), ring.msgLen(), ring.payloadSize(),
                ring.pmtu(), ring.members()))
            .toList());
        final NetreduceConfig next = withoutB.withJob(c);

        final ConfigDiff diff = ConfigDiff.between(BASE, next);

        assertThat(diff.jobsRemoved()).containsExactly("b");
        assertThat(diff.jobsAdded()).containsExactly("c");
        assertThat(diff.ringsRemoved()).extracting(ConfigDiffTest::ringKey).containsExactly("b/2");
        assertThat(diff.ringsAdded()).extracting(ConfigDiffTest::ringKey).containsExactly("c/3");
        assertThat(diff.ringsChanged()).isEmpty();
        assertThat(diff.ringsUnchanged()).extracting(ConfigDiffTest::ringKey).containsExactly("a/1");
    }

    @Test
    void shouldTreatARingMovingBetweenJobsAsRemoveThenAdd()
    {
        final NetreduceConfig moved = parse(ConfigLoaderTest.BASE.replace("name: b", "name: renamed"));

        final ConfigDiff diff = ConfigDiff.between(BASE, moved);

        assertThat(diff.ringsRemoved()).extracting(ConfigDiffTest::ringKey).containsExactly("b/2");
        assertThat(diff.ringsAdded()).extracting(ConfigDiffTest::ringKey).containsExactly("renamed/2");
    }

    @Test
    void shouldAddAndDropRingsWithinAKeptJob()
    {
        final NetreduceConfig next = parse(ConfigLoaderTest.BASE.replace("id: 2", "id: 5"));

        final ConfigDiff diff = ConfigDiff.between(BASE, next);

        assertThat(diff.ringsRemoved()).extracting(ConfigDiffTest::ringKey).containsExactly("b/2");
        assertThat(diff.ringsAdded()).extracting(ConfigDiffTest::ringKey).containsExactly("b/5");
        assertThat(diff.ringsChanged()).isEmpty();
        assertThat(diff.jobsAdded()).isEmpty();
    }

    @Test
    void shouldFlagApplianceChangesSeparately()
    {
        final NetreduceConfig next = parse(ConfigLoaderTest.BASE.replace("memoryBudget: 64MiB", "memoryBudget: 128MiB"));

        final ConfigDiff diff = ConfigDiff.between(BASE, next);

        assertThat(diff.applianceChanged()).isTrue();
        assertThat(diff.isEmpty()).isTrue();
    }
}
