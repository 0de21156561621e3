package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.ConfigException;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.RingRef;
import io.netreduce.controlplane.config.ValidationOptions;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ConfiguredApplianceTest
{
    private final List<String> calls = new ArrayList<>();
    private final RingInstaller recorder = new RingInstaller()
    {
        @Override
        public void install(final RingRef ring)
        {
            calls.add("install " + ring.job() + "/" + ring.ring().id() + " window " + ring.ring().window());
        }

        @Override
        public void remove(final RingRef ring)
        {
            calls.add("remove " + ring.job() + "/" + ring.ring().id() + " window " + ring.ring().window());
        }
    };

    @Test
    void shouldInstallEveryRingAtStartAndOnlyChangedRingsOnReload() throws ConfigException
    {
        final String two = ControlApiTest.CONFIG + ControlApiTest.JOB_B.indent(4).replaceFirst("    name", "  - name");
        final AtomicReference<String> text = new AtomicReference<>(two);
        final ConfiguredAppliance appliance = new ConfiguredAppliance(ConfigLoader.parse(two),
            () -> ConfigLoader.parse(text.get()), recorder, ValidationOptions.DOCUMENT_ONLY);
        assertThat(calls).containsExactly("install a/1 window 8", "install b/2 window 4");
        calls.clear();

        text.set(two.replace("window: 4", "window: 8"));
        final ReloadResult result = appliance.reload();

        assertThat(calls).containsExactly("remove b/2 window 4", "install b/2 window 8");
        assertThat(result.ringsUnchanged()).containsExactly("a/1");
    }

    @Test
    void shouldRemoveRingsOfARemovedJob() throws ConfigException
    {
        final ConfiguredAppliance appliance = new ConfiguredAppliance(ConfigLoader.parse(ControlApiTest.CONFIG),
            () -> ConfigLoader.parse(ControlApiTest.CONFIG), recorder, ValidationOptions.DOCUMENT_ONLY);
        calls.clear();

        appliance.removeJob("a");

        assertThat(calls).containsExactly("remove a/1 window 8");
        assertThat(appliance.rings()).isEmpty();
        assertThatThrownBy(() -> appliance.removeJob("a")).isInstanceOf(NotFoundException.class);
    }

    @Test
    void shouldRefuseAJobOverTheMemoryBudgetWithoutInstallingIt() throws ConfigException
    {
        final ConfiguredAppliance appliance = new ConfiguredAppliance(
            ConfigLoader.parse(ControlApiTest.CONFIG.replace("64MiB", "900KiB")),
            () -> ConfigLoader.parse(ControlApiTest.CONFIG), recorder, ValidationOptions.DOCUMENT_ONLY);
        calls.clear();

        assertThatThrownBy(() -> appliance.addJob(ConfigLoader.parseJob(ControlApiTest.JOB_B)))
            .isInstanceOf(ConfigException.class)
            .hasMessageContaining("appliance.memoryBudget: rings need");
        assertThat(calls).isEmpty();
        assertThat(appliance.listJobs()).hasSize(1);
    }

    @Test
    void shouldSayDataplaneViewsAreUnavailable() throws ConfigException
    {
        final ConfiguredAppliance appliance = new ConfiguredAppliance(ConfigLoader.parse(ControlApiTest.CONFIG),
            () -> ConfigLoader.parse(ControlApiTest.CONFIG), recorder, ValidationOptions.DOCUMENT_ONLY);

        assertThatThrownBy(appliance::counters).isInstanceOf(UnsupportedOperationException.class);
        assertThatThrownBy(() -> appliance.occupancy(1)).isInstanceOf(UnsupportedOperationException.class);
        assertThatThrownBy(() -> appliance.occupancy(77)).isInstanceOf(NotFoundException.class);
    }

    @Test
    void shouldReportApplianceChangeAsNeedingRestartAndKeepRunningAppliance() throws ConfigException
    {
        final ConfiguredAppliance appliance = new ConfiguredAppliance(ConfigLoader.parse(ControlApiTest.CONFIG),
            () -> ConfigLoader.parse(ControlApiTest.CONFIG.replace("name: eth1", "name: eth2")), recorder,
            ValidationOptions.DOCUMENT_ONLY);

        final ReloadResult result = appliance.reload();

        assertThat(result.restartRequired()).isTrue();
        assertThat(appliance.config().appliance().ports().getFirst().name()).isEqualTo("eth1");
    }
}
