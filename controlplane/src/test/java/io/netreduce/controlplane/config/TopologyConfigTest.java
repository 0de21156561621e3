package io.netreduce.controlplane.config;

import io.netreduce.dataplane.ring.Hierarchy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.List;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.junit.jupiter.params.provider.Arguments.arguments;

/**
 * The multi-rack topology of a ring (racks, their leaves, the spine) and the role an appliance takes by its name.
 */
class TopologyConfigTest
{
    /** A valid topology: a flat job and a 2 x 2 job; the broken cases below each break it in one place. */
    static final String TOPOLOGY = """
        appliance:
          name: leaf-b
          ports:
            - name: eth1
          memoryBudget: 64MiB
        jobs:
          - name: flat
            rings:
              - id: 1
                elementType: fp32
                window: 8
                msgLen: 16
                payloadSize: 1024
                pmtu: 1024
                members:
                  - { rank: 0, ip: 10.0.0.1 }
                  - { rank: 1, ip: 10.0.0.2 }
          - name: racked
            rings:
              - id: 2
                elementType: fp16
                window: 4
                msgLen: 8
                payloadSize: 512
                pmtu: 1024
                members:
                  - { rank: 0, ip: 10.0.1.1 }
                  - { rank: 1, ip: 10.0.1.2 }
                  - { rank: 2, ip: 10.0.2.1 }
                  - { rank: 3, ip: 10.0.2.2 }
                  - { rank: 4, ip: 10.0.2.3 }
                spine: spine
                racks:
                  - { leaf: leaf-a, ranks: [0, 1] }
                  - { leaf: leaf-b, ranks: [2, 3, 4] }
        """;

    private static final String RING = "jobs[1].rings[0]";

    @Test
    void shouldReadTheRacksAndTheSpineOfARing() throws ConfigException
    {
        final NetreduceConfig config = ConfigLoader.parse(TOPOLOGY);

        final RingConfig ring = config.job("racked").orElseThrow().rings().getFirst();
        assertThat(config.appliance().name()).isEqualTo("leaf-b");
        assertThat(ring.spine()).isEqualTo("spine");
        assertThat(ring.racks()).containsExactly(
            new RackConfig("leaf-a", List.of(0, 1)), new RackConfig("leaf-b", List.of(2, 3, 4)));
        assertThat(ring.isMultiRack()).isTrue();
        assertThat(config.job("flat").orElseThrow().rings().getFirst().isMultiRack()).isFalse();
    }

    @Test
    void shouldGiveEachApplianceItsPlaceInTheRingByName() throws ConfigException
    {
        final RingConfig ring = ConfigLoader.parse(TOPOLOGY).job("racked").orElseThrow().rings().getFirst();

        assertThat(ring.hierarchyFor("leaf-a")).contains(Hierarchy.leaf(List.of(1, 4), 0));
        assertThat(ring.hierarchyFor("leaf-b")).contains(Hierarchy.leaf(List.of(1, 4), 1));
        assertThat(ring.hierarchyFor("spine")).contains(Hierarchy.spine(List.of(1, 4)));
        assertThat(ring.hierarchyFor("leaf-c")).isEmpty();
        assertThat(ring.hierarchyFor(null)).isEmpty();
    }

    @Test
    void shouldInstallFlatRingsWhateverTheApplianceIsCalled() throws ConfigException
    {
        final RingConfig flat = ConfigLoader.parse(TOPOLOGY).job("flat").orElseThrow().rings().getFirst();

        assertThat(flat.hierarchyFor("anything")).contains(Hierarchy.FLAT);
        assertThat(flat.hierarchyFor(null)).contains(Hierarchy.FLAT);
    }

    @Test
    void shouldKeepOnlyTheJobsAnApplianceHasARoleIn() throws ConfigException
    {
        final NetreduceConfig config = ConfigLoader.parse(TOPOLOGY);

        assertThat(config.served().jobs()).extracting(JobConfig::name).containsExactly("flat", "racked");
        assertThat(config.withApplianceName("spine").served().jobs()).extracting(JobConfig::name)
            .containsExactly("flat", "racked");
        assertThat(config.withApplianceName("elsewhere").served().jobs()).extracting(JobConfig::name)
            .containsExactly("flat");
        assertThat(config.withApplianceName(null).served().jobs()).extracting(JobConfig::name)
            .containsExactly("flat");
    }

    @Test
    void shouldCountOnlyTheRingsThisApplianceInstallsAgainstItsMemoryBudget() throws ConfigException
    {
        final NetreduceConfig config = ConfigLoader.parse(TOPOLOGY);
        final long flat = config.job("flat").orElseThrow().rings().getFirst().aggregatorBytes();
        final long racked = config.job("racked").orElseThrow().rings().getFirst().aggregatorBytes();

        // As a leaf of the ring both rings are its own and no longer fit; named elsewhere only the flat one is.
        final NetreduceConfig tight = config.withApplianceName("leaf-a");
        final ApplianceConfig small = new ApplianceConfig(tight.appliance().ports(), tight.appliance().dataplane(),
            flat + racked - 1, tight.appliance().api(), tight.appliance().metrics(), tight.appliance().logLevel(),
            tight.appliance().captureDirectory(), null, "leaf-a");
        assertThat(ConfigValidator.validate(new NetreduceConfig(small, config.jobs()), ValidationOptions.DOCUMENT_ONLY))
            .extracting(ConfigError::path).containsExactly("appliance.memoryBudget");
        assertThat(ConfigValidator.validate(new NetreduceConfig(small.withName("elsewhere"), config.jobs()),
            ValidationOptions.DOCUMENT_ONLY)).isEmpty();
    }

    static Stream<Arguments> brokenTopologies()
    {
        return Stream.of(
            arguments("racks without a spine", TOPOLOGY.replace("        spine: spine\n", ""),
                RING + ".spine", "a ring with racks needs the name of its spine appliance"),
            arguments("spine without racks", TOPOLOGY.replaceAll("(?s)        racks:\n.*", ""),
                RING + ".racks", "a ring with a spine needs its racks (each with its leaf and ranks); " +
                    "a single-rack ring has neither"),
            arguments("one rack", TOPOLOGY
                    .replace("          - { leaf: leaf-a, ranks: [0, 1] }\n", "")
                    .replace("ranks: [2, 3, 4]", "ranks: [0, 1, 2, 3, 4]"),
                RING + ".racks", "a multi-rack ring needs at least 2 racks, got 1 (a single rack is a flat ring: " +
                    "remove racks and spine)"),
            arguments("rack 0 not from rank 0", TOPOLOGY
                    .replace("ranks: [0, 1]", "ranks: [1, 0]"),
                RING + ".racks[0].ranks[0]", "expected rank 0, got 1 (racks hold consecutive ranks in ring order, " +
                    "rack 0 from rank 0, so that each rack has one connection leaving it and one entering it)"),
            arguments("a gap between racks", TOPOLOGY.replace("ranks: [2, 3, 4]", "ranks: [3, 4]"),
                RING + ".racks[1].ranks[0]", "expected rank 2, got 3 (racks hold consecutive ranks in ring order, " +
                    "rack 0 from rank 0, so that each rack has one connection leaving it and one entering it)"),
            arguments("interleaved racks", TOPOLOGY
                    .replace("ranks: [0, 1]", "ranks: [0, 2]").replace("ranks: [2, 3, 4]", "ranks: [1, 3, 4]"),
                RING + ".racks[0].ranks[1]", "expected rank 1, got 2 (racks hold consecutive ranks in ring order, " +
                    "rack 0 from rank 0, so that each rack has one connection leaving it and one entering it)"),
            arguments("a rank in no rack", TOPOLOGY.replace("ranks: [2, 3, 4]", "ranks: [2, 3]"),
                RING + ".racks", "the racks hold ranks 0..3 but the ring has 5 members: every rank must be in a rack"),
            arguments("an empty rack", TOPOLOGY.replace("ranks: [2, 3, 4]", "ranks: []"),
                RING + ".racks[1].ranks", "a rack needs at least one rank"),
            arguments("duplicate leaf", TOPOLOGY.replace("leaf: leaf-b", "leaf: leaf-a"),
                RING + ".racks[1].leaf", "duplicate leaf 'leaf-a' (also " + RING + ".racks[0].leaf): an appliance " +
                    "serves one rack of a ring"),
            arguments("spine is also a leaf", TOPOLOGY.replace("leaf: leaf-b", "leaf: spine"),
                RING + ".racks[1].leaf", "'spine' is the ring's spine: an appliance has one role in a ring"),
            arguments("leaf name missing", TOPOLOGY.replace("leaf: leaf-b, ", ""),
                RING + ".racks[1].leaf", "required key is missing"),
            arguments("leaf name not a name", TOPOLOGY.replace("leaf: leaf-b", "leaf: \"leaf b\""),
                RING + ".racks[1].leaf", "leaf name 'leaf b' must be 1-64 characters of letters, digits, '_', '.', " +
                    "'-', starting with a letter or digit"),
            arguments("rank not an integer", TOPOLOGY.replace("ranks: [2, 3, 4]", "ranks: [2, three, 4]"),
                RING + ".racks[1].ranks[1]", "expected an integer, got the string 'three'"),
            arguments("unknown rack key", TOPOLOGY.replace("leaf: leaf-b,", "leaf: leaf-b, switch: sw2,"),
                RING + ".racks[1].switch", "unknown key (expected one of leaf, ranks)"),
            arguments("racks not a list", TOPOLOGY.replaceAll("(?s)        racks:\n.*", "        racks: leaf-a\n"),
                RING + ".racks", "expected a list, got the string 'leaf-a'"),
            arguments("results not marked", TOPOLOGY.replace("        spine: spine\n",
                    "        spine: spine\n        resultTag: NRED\n"),
                RING + ".resultTag", "a multi-rack ring needs a resultTag other than its inetTag: a leaf tells the " +
                    "spine's result from a raw gradient by it"),
            arguments("the partial tag taken", TOPOLOGY.replace("        spine: spine\n",
                    "        spine: spine\n        inetTag: NRPT\n"),
                RING + ".inetTag", "the tag NRPT marks a leaf's partial sums; a multi-rack ring's tags must " +
                    "differ from it"),
            arguments("appliance name not a name", TOPOLOGY.replace("name: leaf-b", "name: leaf/b"),
                "appliance.name", "appliance name 'leaf/b' must be 1-64 characters of letters, digits, '_', '.', " +
                    "'-', starting with a letter or digit"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("brokenTopologies")
    void shouldRefuseABrokenTopologyNamingThePath(
        final String name, final String yaml, final String path, final String reason)
    {
        final ConfigException ex = catchThrowableOfType(ConfigException.class, () -> ConfigLoader.parse(yaml));

        assertThat(ex).as(name).isNotNull();
        assertThat(ex.errors()).as(name).containsExactly(new ConfigError(path, reason));
    }

    @Test
    void shouldAcceptTheSameTopologyInAJobAddedThroughTheApi() throws ConfigException
    {
        final String job = TOPOLOGY.substring(TOPOLOGY.indexOf("  - name: racked"))
            .replaceAll("(?m)^    ", "").replaceFirst("^  - ", "");

        final JobConfig parsed = ConfigLoader.parseJob(job);

        assertThat(parsed.rings().getFirst().racks()).hasSize(2);
        final ConfigException ex = catchThrowableOfType(ConfigException.class,
            () -> ConfigLoader.parseJob(job.replace("leaf: leaf-b", "leaf: leaf-a")));
        assertThat(ex.errors()).extracting(ConfigError::path).containsExactly("rings[0].racks[1].leaf");
    }
}
