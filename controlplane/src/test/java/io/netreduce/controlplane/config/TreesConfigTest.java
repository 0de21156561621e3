package io.netreduce.controlplane.config;

import io.netreduce.dataplane.ring.Hierarchy;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/**
 * Several aggregation trees per job (PANAMA §4.1): a job's rings that each name the appliance aggregating them, one
 * topology file for every appliance, each installing only its own trees.
 */
class TreesConfigTest
{
    static final String TREES = """
        appliance:
          name: tree-b
          ports:
            - name: eth1
          memoryBudget: 64MiB
        jobs:
          - name: two-trees
            rings:
              - id: 1
                appliance: tree-a
                elementType: fp32
                window: 8
                msgLen: 16
                payloadSize: 1024
                pmtu: 1024
                members:
                  - { rank: 0, ip: 10.0.0.1 }
                  - { rank: 1, ip: 10.0.0.2 }
              - id: 2
                appliance: tree-b
                elementType: fp32
                window: 8
                msgLen: 16
                payloadSize: 1024
                pmtu: 1024
                members:
                  - { rank: 0, ip: 10.0.0.1 }
                  - { rank: 1, ip: 10.0.0.2 }
          - name: flat
            rings:
              - id: 3
                elementType: fp32
                window: 8
                msgLen: 16
                payloadSize: 1024
                pmtu: 1024
                members:
                  - { rank: 0, ip: 10.0.1.1 }
                  - { rank: 1, ip: 10.0.1.2 }
        """;

    @Test
    void shouldInstallEachTreeOnlyOnTheApplianceItNames() throws ConfigException
    {
        final List<RingConfig> trees = ConfigLoader.parse(TREES).job("two-trees").orElseThrow().rings();

        assertThat(trees).extracting(RingConfig::appliance).containsExactly("tree-a", "tree-b");
        assertThat(trees.get(0).hierarchyFor("tree-a")).contains(Hierarchy.FLAT);
        assertThat(trees.get(0).hierarchyFor("tree-b")).isEmpty();
        assertThat(trees.get(1).hierarchyFor("tree-b")).contains(Hierarchy.FLAT);
        assertThat(trees.get(1).hierarchyFor("tree-a")).isEmpty();
        assertThat(trees.get(1).hierarchyFor(null)).as("an appliance without a name serves no named tree").isEmpty();
    }

    @Test
    void shouldServeEachApplianceItsTreesAndEveryUnnamedFlatRing() throws ConfigException
    {
        final NetreduceConfig config = ConfigLoader.parse(TREES);

        assertThat(config.served().job("two-trees").orElseThrow().rings()).extracting(RingConfig::id)
            .containsExactly(2);
        assertThat(config.withApplianceName("tree-a").served().job("two-trees").orElseThrow().rings())
            .extracting(RingConfig::id).containsExactly(1);
        assertThat(config.withApplianceName("elsewhere").served().jobs()).extracting(JobConfig::name)
            .containsExactly("flat");
    }

    @Test
    void shouldCountOnlyItsOwnTreesAgainstAnAppliancesMemoryBudget() throws ConfigException
    {
        final NetreduceConfig config = ConfigLoader.parse(TREES);
        final long ring = config.job("flat").orElseThrow().rings().getFirst().aggregatorBytes();
        final ApplianceConfig a = config.appliance();
        // Room for the flat ring and one tree: both trees on one appliance would not fit.
        final ApplianceConfig small = new ApplianceConfig(a.ports(), a.dataplane(), 2 * ring, a.api(), a.metrics(),
            a.logLevel(), a.captureDirectory(), null, "tree-b");

        assertThat(ConfigValidator.validate(new NetreduceConfig(small, config.jobs()), ValidationOptions.DOCUMENT_ONLY))
            .isEmpty();
    }

    @Test
    void shouldRefuseATreeApplianceThatIsNotAName()
    {
        final ConfigException ex = catchThrowableOfType(ConfigException.class,
            () -> ConfigLoader.parse(TREES.replace("appliance: tree-b", "appliance: \"tree b\"")));

        assertThat(ex.errors()).containsExactly(new ConfigError("jobs[0].rings[1].appliance",
            "appliance name 'tree b' must be 1-64 characters of letters, digits, '_', '.', '-', starting with a " +
                "letter or digit"));
    }

    @Test
    void shouldRefuseATreeWithRacks()
    {
        final String racked = TREES.replace(
            "          - { rank: 1, ip: 10.0.0.2 }\n      - id: 2",
            "          - { rank: 1, ip: 10.0.0.2 }\n        spine: spine\n        racks:\n" +
                "          - { leaf: leaf-a, ranks: [0] }\n          - { leaf: leaf-b, ranks: [1] }\n      - id: 2");
        assertThat(racked).isNotEqualTo(TREES);

        final ConfigException ex = catchThrowableOfType(ConfigException.class, () -> ConfigLoader.parse(racked));

        assertThat(ex.errors()).containsExactly(new ConfigError("jobs[0].rings[0].appliance",
            "a ring that names its appliance is flat (one tree through that appliance): remove racks and spine, " +
                "or the appliance"));
    }
}
