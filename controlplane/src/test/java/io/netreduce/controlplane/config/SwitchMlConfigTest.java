package io.netreduce.controlplane.config;

import io.netreduce.controlplane.api.ConfigSource;
import io.netreduce.controlplane.api.ConfiguredAppliance;
import io.netreduce.controlplane.api.RingInstaller;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.junit.jupiter.params.provider.Arguments.arguments;

/**
 * SwitchML in the configuration: the appliance's address and controller, jobs of their own, their checks, and the
 * install and remove calls a reload makes.
 */
class SwitchMlConfigTest
{
    private static final String BASE = """
        appliance:
          ports:
            - name: eth1
          memoryBudget: 64MiB
          switchml:
            mac: 02:77:00:00:00:fe
            ip: 10.77.0.254
            controller:
              listen: 0.0.0.0:50099
              allow: [10.77.0.0/24]
        jobs:
          - name: sml
            switchml:
              elementsPerPacket: 64
              poolSize: 128
              workers:
                - { rank: 0, ip: 10.77.0.1 }
                - { rank: 1, ip: 10.77.0.2, mac: "02:77:00:00:00:02" }
          - name: ring
            rings:
              - id: 1
                elementType: fp32
                window: 8
                msgLen: 16
                payloadSize: 1024
                pmtu: 1024
                members:
                  - { rank: 0, ip: 10.77.0.1 }
                  - { rank: 1, ip: 10.77.0.2 }
        """;

    @Test
    void shouldReadTheAppliancesSwitchMlAddressControllerAndJobs() throws ConfigException
    {
        final NetreduceConfig config = ConfigLoader.parse(BASE);

        final SwitchMlApplianceConfig appliance = config.appliance().switchml();
        assertThat(appliance).isEqualTo(new SwitchMlApplianceConfig("02:77:00:00:00:fe", "10.77.0.254",
            "0.0.0.0:50099", List.of("10.77.0.0/24"), SwitchMlApplianceConfig.DEFAULT_SESSION_POOL_SIZE));
        final JobConfig job = config.job("sml").orElseThrow();
        assertThat(job.rings()).isEmpty();
        assertThat(job.switchml()).isEqualTo(new SwitchMlJobConfig(64, 128, List.of(
            new SwitchMlJobConfig.Worker(0, "10.77.0.1", null),
            new SwitchMlJobConfig.Worker(1, "10.77.0.2", "02:77:00:00:00:02"))));
        assertThat(config.served().job("sml")).isPresent();
    }

    @Test
    void shouldTakeTheDefaultsOfAJobThatNamesOnlyItsWorkers() throws ConfigException
    {
        final NetreduceConfig config = ConfigLoader.parse(BASE.replace("      elementsPerPacket: 64\n", "")
            .replace("      poolSize: 128\n", ""));

        assertThat(config.job("sml").orElseThrow().switchml().elementsPerPacket())
            .isEqualTo(SwitchMlJobConfig.DEFAULT_ELEMENTS_PER_PACKET);
        assertThat(config.job("sml").orElseThrow().switchml().poolSize())
            .isEqualTo(SwitchMlJobConfig.DEFAULT_POOL_SIZE);
    }

    static Stream<Arguments> brokenConfigs()
    {
        return Stream.of(
            arguments("no appliance address", BASE.replace("""
                  switchml:
                    mac: 02:77:00:00:00:fe
                    ip: 10.77.0.254
                    controller:
                      listen: 0.0.0.0:50099
                      allow: [10.77.0.0/24]
                """, ""), "jobs[0].switchml", "a SwitchML job needs appliance.switchml (the MAC and IPv4 address " +
                "the appliance answers SwitchML workers from)"),
            arguments("group MAC", BASE.replace("mac: 02:77:00:00:00:fe", "mac: 03:77:00:00:00:fe"),
                "appliance.switchml.mac", "'03:77:00:00:00:fe' is a group address; the appliance's SwitchML MAC " +
                    "must be unicast"),
            arguments("IPv6 address", BASE.replace("ip: 10.77.0.254", "ip: fd00::1"),
                "appliance.switchml.ip", "'fd00::1' is not a unicast IPv4 address (SwitchML speaks IPv4)"),
            arguments("controller without allow", BASE.replace("      allow: [10.77.0.0/24]\n", ""),
                "appliance.switchml.controller.allow", "name the networks whose hosts may open SwitchML sessions " +
                    "(e.g. [10.77.0.0/24]): a session replaces the slot state of its workers' earlier one"),
            arguments("bad network", BASE.replace("allow: [10.77.0.0/24]", "allow: [10.77.0.0/33]"),
                "appliance.switchml.controller.allow[0]", "'10.77.0.0/33': the prefix length must be 0..32"),
            arguments("odd elements", BASE.replace("elementsPerPacket: 64", "elementsPerPacket: 63"),
                "jobs[0].switchml.elementsPerPacket", "63 is not an even number from 2 to 2048 (the published " +
                    "client sends 64 or 256)"),
            arguments("pool too large", BASE.replace("poolSize: 128", "poolSize: 16385"),
                "jobs[0].switchml.poolSize", "16385 is not in 1..16384"),
            arguments("duplicate rank", BASE.replace("{ rank: 1, ip: 10.77.0.2,", "{ rank: 0, ip: 10.77.0.2,"),
                "jobs[0].switchml.workers[1].rank", "rank 0 is also jobs[0].switchml.workers[0].rank"),
            arguments("same worker twice", BASE.replace("ip: 10.77.0.2, mac", "ip: 10.77.0.1, mac"),
                "jobs[0].switchml.workers[1].ip", "10.77.0.1 is also jobs[0].switchml.workers[0].ip (the " +
                    "appliance finds a SwitchML packet's job and worker by its source address)"),
            arguments("unknown key", BASE.replace("poolSize: 128", "poolSize: 128\n      slots: 4"),
                "jobs[0].switchml.slots", null),
            arguments("rings and switchml", BASE.replace("      poolSize: 128\n", """
                      poolSize: 128
                    rings:
                      - id: 2
                        elementType: fp32
                        window: 8
                        msgLen: 16
                        payloadSize: 1024
                        pmtu: 1024
                        members:
                          - { rank: 0, ip: 10.0.0.1 }
                """.replace("  ", " ").replace("\n ", "\n").indent(0)), null, null),
            arguments("over the budget", BASE.replace("poolSize: 128", "poolSize: 16384")
                .replace("elementsPerPacket: 64", "elementsPerPacket: 2048"),
                "appliance.memoryBudget", null),
            arguments("two lanes", BASE.replace("  memoryBudget: 64MiB", "  memoryBudget: 64MiB\n  dataplane:\n" +
                "    lanes: 2"), "appliance.dataplane.lanes", "SwitchML jobs run on one lane: the lanes' steering " +
                "knows rings only (set lanes: 1, or drop appliance.switchml)"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("brokenConfigs")
    void shouldRefuseABrokenSwitchMlConfigWithPathAndReason(
        final String name, final String yaml, final String path, final String reason)
    {
        final ConfigException ex = catchThrowableOfType(ConfigException.class, () -> ConfigLoader.parse(yaml));

        assertThat(ex).as(name).isNotNull();
        if (path != null)
        {
            assertThat(ex.errors()).as(name).extracting(ConfigError::path).contains(path);
        }
        if (reason != null)
        {
            assertThat(ex.errors()).as(name).contains(new ConfigError(path, reason));
        }
    }

    @Test
    void shouldInstallSwitchMlJobsAndReinstallOnlyTheOneAReloadChanges() throws ConfigException
    {
        final List<String> calls = new ArrayList<>();
        final RingInstaller installer = new RingInstaller()
        {
            @Override
            public void install(final RingRef ring)
            {
                calls.add("install ring " + ring.ring().id());
            }

            @Override
            public void remove(final RingRef ring)
            {
                calls.add("remove ring " + ring.ring().id());
            }

            @Override
            public void installSwitchMl(final String job, final SwitchMlJobConfig switchml)
            {
                calls.add("install switchml " + job + " " + switchml.poolSize());
            }

            @Override
            public void removeSwitchMl(final String job)
            {
                calls.add("remove switchml " + job);
            }
        };
        final String[] next = { BASE };
        final ConfigSource source = () -> ConfigLoader.parse(next[0]);
        final ConfiguredAppliance appliance = new ConfiguredAppliance(ConfigLoader.parse(BASE), source, installer,
            ValidationOptions.DOCUMENT_ONLY);
        assertThat(calls).containsExactly("install switchml sml 128", "install ring 1");

        calls.clear();
        appliance.reload();
        assertThat(calls).as("nothing changed").isEmpty();

        next[0] = BASE.replace("poolSize: 128", "poolSize: 256");
        appliance.reload();
        assertThat(calls).containsExactly("remove switchml sml", "install switchml sml 256");

        calls.clear();
        next[0] = BASE.replace("  - name: sml\n", "  - name: sml2\n");
        appliance.reload();
        assertThat(calls).containsExactly("remove switchml sml", "install switchml sml2 256".replace("256", "128"));
    }
}
