package io.netreduce.controlplane.config;

import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.InterfaceMtu;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.junit.jupiter.api.Assumptions.assumeTrue;
import static org.junit.jupiter.params.provider.Arguments.arguments;

class ConfigLoaderTest
{
    /** A valid configuration the broken cases below each break in one place. */
    static final String BASE = """
        appliance:
          ports:
            - name: eth1
          memoryBudget: 64MiB
        jobs:
          - name: a
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
                  - { rank: 2, ip: 10.0.0.3 }
          - name: b
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
                  - { rank: 2, ip: 10.0.1.3 }
                  - { rank: 3, ip: 10.0.1.4 }
        """;

    static Path repoRoot()
    {
        return Path.of(System.getProperty("netreduce.repo.root", "..")).toAbsolutePath().normalize();
    }

    /**
     * Parallel rings (paper §3.4): a host with n local workers is a member of n rings with one address; the
     * appliance keys connections by (source, destination, QPN) and the ring by its RingID, so the same member
     * addresses in several rings are accepted. Within one ring an address stays unique (duplicate-address case).
     */
    @Test
    void shouldAcceptTheSameMemberAddressesInParallelRings() throws ConfigException
    {
        final String parallel = BASE + """
                      - id: 3
                        elementType: fp16
                        window: 4
                        msgLen: 8
                        payloadSize: 512
                        pmtu: 1024
                        members:
                          - { rank: 0, ip: 10.0.1.1 }
                          - { rank: 1, ip: 10.0.1.2 }
                          - { rank: 2, ip: 10.0.1.3 }
                          - { rank: 3, ip: 10.0.1.4 }
                """;
        final NetreduceConfig config = ConfigLoader.parse(parallel);
        assertThat(config.jobs().get(1).rings()).hasSize(2);
    }

    @Test
    void shouldLoadEveryExampleInConfigDirectory() throws IOException, ConfigException
    {
        final List<Path> examples;
        try (Stream<Path> files = Files.list(repoRoot().resolve("config")))
        {
            examples = files.filter(file -> file.toString().endsWith(".yaml")).sorted().toList();
        }
        assertThat(examples).hasSizeGreaterThanOrEqualTo(3);
        for (final Path example : examples)
        {
            final NetreduceConfig config = ConfigLoader.load(example);
            assertThat(config.jobs()).as(example.toString()).isNotEmpty();
            assertThat(config.aggregatorBytes()).as(example.toString())
                .isLessThanOrEqualTo(config.appliance().memoryBudget());
        }
    }

    @Test
    void shouldReadTheLanesNiceValue() throws ConfigException
    {
        final NetreduceConfig config = ConfigLoader.parse(BASE.replace("  memoryBudget: 64MiB",
            "  memoryBudget: 64MiB\n  dataplane: { laneNice: 0 }"));

        assertThat(config.appliance().dataplane().laneNice()).isZero();
    }

    @Test
    void shouldGiveForeignConnectionsAQuarterOfTheCltAndASourceAtMost1024OfThemByDefault() throws ConfigException
    {
        final DataplaneConfig defaults = ConfigLoader.parse(BASE).appliance().dataplane();
        assertThat(defaults.cltEntries()).isEqualTo(16384);
        assertThat(defaults.cltForeignEntries()).isEqualTo(4096);
        assertThat(defaults.cltForeignPerSource()).isEqualTo(1024);

        final DataplaneConfig small = ConfigLoader.parse(BASE.replace("  memoryBudget: 64MiB",
            "  memoryBudget: 64MiB\n  dataplane: { cltEntries: 2048 }")).appliance().dataplane();
        assertThat(small.cltForeignEntries()).as("a quarter of the CLT").isEqualTo(512);
        assertThat(small.cltForeignPerSource()).as("at most the foreign share").isEqualTo(512);

        final DataplaneConfig set = ConfigLoader.parse(BASE.replace("  memoryBudget: 64MiB",
            "  memoryBudget: 64MiB\n  dataplane: { cltEntries: 65536, cltForeignEntries: 1000, " +
                "cltForeignPerSource: 10 }")).appliance().dataplane();
        assertThat(set.cltEntries()).isEqualTo(65536);
        assertThat(set.cltForeignEntries()).isEqualTo(1000);
        assertThat(set.cltForeignPerSource()).isEqualTo(10);
        assertThat(set.ecnBacklog()).as("a quarter of the receive queue by default").isEqualTo(0.25);

        final DataplaneConfig marking = ConfigLoader.parse(BASE.replace("  memoryBudget: 64MiB",
            "  memoryBudget: 64MiB\n  dataplane: { ecnBacklog: 0.5 }")).appliance().dataplane();
        assertThat(marking.ecnBacklog()).isEqualTo(0.5);
    }

    @Test
    void shouldLoadBaseWithDefaults() throws ConfigException
    {
        final NetreduceConfig config = ConfigLoader.parse(BASE);

        final ApplianceConfig appliance = config.appliance();
        assertThat(appliance.ports()).containsExactly(new PortConfig("eth1", PortConfig.DEFAULT_MTU));
        assertThat(appliance.ports().get(0).type()).isEqualTo(PortType.AF_PACKET);
        assertThat(appliance.dataplane()).isEqualTo(new DataplaneConfig(IdleStrategyKind.POLL, 64, 1024, 0.0, 1));
        assertThat(appliance.dataplane().laneNice()).isEqualTo(-10);
        assertThat(appliance.memoryBudget()).isEqualTo(64L << 20);
        assertThat(appliance.api()).as("a Unix socket by default").isEqualTo(
            ListenAddress.parse("unix:/run/netreduce/api.sock"));
        assertThat(appliance.apiTokenFile()).isNull();
        assertThat(appliance.metrics()).isEqualTo(new ListenAddress("127.0.0.1", 9741, null));
        assertThat(appliance.logLevel()).isEqualTo(LogLevel.INFO);
        assertThat(appliance.captureDirectory()).isEqualTo("/var/lib/netreduce/captures");
        assertThat(config.jobs()).extracting(JobConfig::name).containsExactly("a", "b");
        final RingConfig ring = config.jobs().get(1).rings().get(0);
        assertThat(ring).isEqualTo(new RingConfig(2, ElementType.FP16, 4, 8, 512, 1024, List.of(
            new MemberConfig(0, "10.0.1.1", null, null), new MemberConfig(1, "10.0.1.2", null, null),
            new MemberConfig(2, "10.0.1.3", null, null), new MemberConfig(3, "10.0.1.4", null, null))));
        assertThat(ring.worldSize()).isEqualTo(4);
    }

    @Test
    void shouldReadEachPortsType() throws ConfigException
    {
        final NetreduceConfig config = ConfigLoader.parse(BASE.replace("    - name: eth1\n",
            "    - name: eth1\n      type: af_xdp\n    - { name: eth2, type: af_packet }\n"));

        assertThat(config.appliance().ports()).containsExactly(
            new PortConfig("eth1", PortConfig.DEFAULT_MTU, PortType.AF_XDP),
            new PortConfig("eth2", PortConfig.DEFAULT_MTU, PortType.AF_PACKET));
    }

    @Test
    void shouldReadEachPortsSegmentationOffloadOnForAfPacketAndOffForAfXdpUnlessConfigured() throws ConfigException
    {
        final NetreduceConfig config = ConfigLoader.parse(BASE.replace("    - name: eth1\n",
            "    - name: eth1\n      segmentation_offload: true\n" +
            "    - { name: eth2, type: af_packet, segmentation_offload: false }\n" +
            "    - { name: eth3, mtu: 9000 }\n" +
            "    - { name: eth4, type: af_xdp }\n"));

        assertThat(config.appliance().ports()).containsExactly(
            new PortConfig("eth1", PortConfig.DEFAULT_MTU, PortType.AF_PACKET, true),
            new PortConfig("eth2", PortConfig.DEFAULT_MTU, PortType.AF_PACKET, false),
            new PortConfig("eth3", 9000, PortType.AF_PACKET, true),
            new PortConfig("eth4", PortConfig.DEFAULT_MTU, PortType.AF_XDP, false));
        assertThat(new PortConfig("eth5", 1500).segmentationOffload()).isTrue();
        assertThat(new PortConfig("eth6", 1500, PortType.AF_XDP).segmentationOffload()).isFalse();
    }

    static Stream<Arguments> brokenConfigs()
    {
        return Stream.of(
            arguments("bad address", BASE.replace("ip: 10.0.1.4", "ip: 10.0.1.400"),
                "jobs[1].rings[0].members[3].ip", "not an IPv4 or IPv6 address"),
            arguments("abbreviated IPv4 address", BASE.replace("ip: 10.0.1.4", "ip: 10.0.4"),
                "jobs[1].rings[0].members[3].ip", "not an IPv4 or IPv6 address"),
            arguments("IPv4 octet with leading zero", BASE.replace("ip: 10.0.1.4", "ip: 10.0.1.04"),
                "jobs[1].rings[0].members[3].ip", "not an IPv4 or IPv6 address"),
            arguments("host name instead of address", BASE.replace("ip: 10.0.0.2", "ip: worker2.example"),
                "jobs[0].rings[0].members[1].ip", "not an IPv4 or IPv6 address"),
            arguments("duplicate rank", BASE.replace("{ rank: 2, ip: 10.0.0.3 }", "{ rank: 1, ip: 10.0.0.3 }"),
                "jobs[0].rings[0].members[2].rank", "duplicate rank 1 (also jobs[0].rings[0].members[1].rank)"),
            arguments("rank out of range", BASE.replace("{ rank: 2, ip: 10.0.0.3 }", "{ rank: 3, ip: 10.0.0.3 }"),
                "jobs[0].rings[0].members[2].rank", "rank 3 is not in 0..2 (ranks are 0..worldSize-1)"),
            arguments("window 0", BASE.replace("window: 8", "window: 0"),
                "jobs[0].rings[0].window",
                "window 0 is not a power of two in 1..128 (MsgID is 8 bits and the aggregator index is MsgID % 2N)"),
            arguments("window not a power of two", BASE.replace("window: 8", "window: 12"),
                "jobs[0].rings[0].window",
                "window 12 is not a power of two in 1..128 (MsgID is 8 bits and the aggregator index is MsgID % 2N)"),
            arguments("msgLen 256", BASE.replace("msgLen: 16", "msgLen: 256"),
                "jobs[0].rings[0].msgLen", "256 is not in 1..255"),
            arguments("unknown key", BASE.replace("window: 4", "window: 4\n        windw: 4"),
                "jobs[1].rings[0].windw",
                "unknown key (expected one of appliance, elementType, id, inetTag, members, msgLen, payloadSize, pmtu, racks, resultTag, spine, window)"),
            arguments("drop probability 1", BASE.replace("memoryBudget: 64MiB",
                    "memoryBudget: 64MiB\n  dataplane:\n    dropProbability: 1.0"),
                "appliance.dataplane.dropProbability", "1.0 is not in [0, 1)"),
            arguments("ECN backlog above the queue", BASE.replace("memoryBudget: 64MiB",
                    "memoryBudget: 64MiB\n  dataplane:\n    ecnBacklog: 1.5"),
                "appliance.dataplane.ecnBacklog", "1.5 is not a fraction of the receive queue in [0, 1] (0: the " +
                    "appliance never marks ECN itself)"),
            arguments("unknown key at top", BASE + "extra: 1\n",
                "extra", "unknown key (expected one of appliance, jobs)"),
            arguments("memory over budget", BASE.replace("memoryBudget: 64MiB", "memoryBudget: 1MiB"),
                "appliance.memoryBudget", "rings need 1.3MiB of aggregator memory (jobs[0].rings[0] 1.1MiB, " +
                    "jobs[1].rings[0] 196KiB), over the budget of 1MiB"),
            arguments("missing required key", BASE.replace("        pmtu: 1024\n        members:\n" +
                    "          - { rank: 0, ip: 10.0.1.1 }", "        members:\n          - { rank: 0, ip: 10.0.1.1 }"),
                "jobs[1].rings[0].pmtu", "required key is missing"),
            arguments("wrong type", BASE.replace("msgLen: 8", "msgLen: eight"),
                "jobs[1].rings[0].msgLen", "expected an integer, got the string 'eight'"),
            arguments("list instead of mapping", BASE.replace("  memoryBudget: 64MiB", "  memoryBudget: [1]"),
                "appliance.memoryBudget", "expected a size like 512MiB, got a list"),
            arguments("duplicate ring id across jobs", BASE.replace("id: 2", "id: 1"),
                "jobs[1].rings[0].id", "ring id 1 is already used by jobs[0].rings[0].id " +
                    "(ring ids are 8 bits on the wire and must be unique across all jobs)"),
            arguments("ring id over 8 bits", BASE.replace("id: 2", "id: 256"),
                "jobs[1].rings[0].id", "ring id 256 is not in 0..255"),
            arguments("duplicate member address", BASE.replace("ip: 10.0.1.3", "ip: 10.0.1.1"),
                "jobs[1].rings[0].members[2].ip",
                "duplicate member address 10.0.1.1 (also jobs[1].rings[0].members[0].ip)"),
            arguments("payload not a multiple of the element size", BASE.replace("payloadSize: 512", "payloadSize: 511"),
                "jobs[1].rings[0].payloadSize", "payload size 511 is not a multiple of the fp16 element size 2"),
            arguments("payload over the PMTU", BASE.replace("payloadSize: 512", "payloadSize: 2048"),
                "jobs[1].rings[0].payloadSize", "payload size 2048 exceeds the PMTU 1024"),
            arguments("bad PMTU", BASE.replace("pmtu: 1024\n        members:\n          - { rank: 0, ip: 10.0.1.1 }",
                    "pmtu: 1500\n        members:\n          - { rank: 0, ip: 10.0.1.1 }"),
                "jobs[1].rings[0].pmtu", "PMTU 1500 is not one of [256, 512, 1024, 2048, 4096]"),
            arguments("world size 1", BASE.replace("""
                          - { rank: 1, ip: 10.0.0.2 }
                          - { rank: 2, ip: 10.0.0.3 }
                """, ""),
                "jobs[0].rings[0].members", "world size 1 is not in 2..64"),
            arguments("bad element type", BASE.replace("elementType: fp16", "elementType: fp64"),
                "jobs[1].rings[0].elementType", "'fp64' is not one of fp32, fp16, bf16 or int32"),
            arguments("no lanes", BASE.replace("  memoryBudget: 64MiB",
                    "  memoryBudget: 64MiB\n  dataplane: { lanes: 0 }"),
                "appliance.dataplane.lanes", "0 is not in 1..64"),
            arguments("lanes on an AF_XDP port", BASE.replace("- name: eth1", "- name: eth1\n      type: af_xdp")
                    .replace("  memoryBudget: 64MiB", "  memoryBudget: 64MiB\n  dataplane: { lanes: 2 }"),
                "appliance.dataplane.lanes", "2 lanes need af_packet ports (the kernel steers frames to lanes with " +
                    "an AF_PACKET fanout group), but port 'eth1' is af_xdp"),
            arguments("unknown dataplane key", BASE.replace("  memoryBudget: 64MiB",
                    "  memoryBudget: 64MiB\n  dataplane: { lane: 2 }"),
                "appliance.dataplane.lane", "unknown key (expected one of batchSize, cltEntries, cltForeignEntries, " +
                    "cltForeignPerSource, commandQueueCapacity, dropProbability, dropSeed, ecnBacklog, idleStrategy, " +
                    "laneNice, lanes)"),
            arguments("foreign share larger than the CLT", BASE.replace("  memoryBudget: 64MiB",
                    "  memoryBudget: 64MiB\n  dataplane: { cltEntries: 1024, cltForeignEntries: 2048 }"),
                "appliance.dataplane.cltForeignEntries", "2048 is not in 1..1024"),
            arguments("per-source share larger than the foreign share", BASE.replace("  memoryBudget: 64MiB",
                    "  memoryBudget: 64MiB\n  dataplane: { cltForeignEntries: 100, cltForeignPerSource: 101 }"),
                "appliance.dataplane.cltForeignPerSource", "101 is not in 1..100"),
            arguments("CLT too small", BASE.replace("  memoryBudget: 64MiB",
                    "  memoryBudget: 64MiB\n  dataplane: { cltEntries: 8 }"),
                "appliance.dataplane.cltEntries", "8 is not in 16..1048576"),
            arguments("lane nice above 19", BASE.replace("  memoryBudget: 64MiB",
                    "  memoryBudget: 64MiB\n  dataplane: { laneNice: 20 }"),
                "appliance.dataplane.laneNice", "20 is not in -20..19"),
            arguments("tag of three characters", BASE.replace("elementType: fp16", "elementType: fp16\n        inetTag: ABC"),
                "jobs[1].rings[0].inetTag", "'ABC' is not 4 printable ASCII characters (the InetTag is 4 bytes, e.g. NRED)"),
            arguments("result tag with a space", BASE.replace("elementType: fp16",
                    "elementType: fp16\n        resultTag: 'A BC'"),
                "jobs[1].rings[0].resultTag", "'A BC' is not 4 printable ASCII characters (the InetTag is 4 bytes, e.g. NRED)"),
            arguments("window in octal", BASE.replace("window: 8", "window: 020"),
                "jobs[0].rings[0].window", "'020' is read by YAML as 16 (another base or a separator): write the " +
                    "decimal number"),
            arguments("window in hex", BASE.replace("window: 8", "window: 0x10"),
                "jobs[0].rings[0].window", "'0x10' is read by YAML as 16 (another base or a separator): write the " +
                    "decimal number"),
            arguments("PMTU over the port's MTU", BASE.replace("payloadSize: 1024\n        pmtu: 1024",
                    "payloadSize: 4096\n        pmtu: 4096"),
                "jobs[0].rings[0].pmtu", "PMTU 4096 plus the RoCEv2 headers (64 bytes) does not fit the MTU 1500 " +
                    "of port eth1: its frames could not reach the appliance"),
            arguments("IPv4 and IPv6 members", BASE.replace("ip: 10.0.0.2", "ip: 'fd00::2'"),
                "jobs[0].rings[0].members", "members mix IPv4 and IPv6 addresses: a ring's connections are all one " +
                    "family"),
            arguments("a second document", BASE + "---\nappliance: {}\n",
                "", "a second YAML document at line 32: a configuration is one document (remove the '---' and " +
                    "what follows, or merge it)"),
            arguments("capture directory /", BASE.replace("  memoryBudget: 64MiB",
                    "  memoryBudget: 64MiB\n  captureDirectory: /"),
                "appliance.captureDirectory", "'/' is a system directory: captures requested through the API could " +
                    "be written over its files; use a directory of its own, e.g. /var/lib/netreduce/captures"),
            arguments("API on TCP without a token", BASE.replace("  memoryBudget: 64MiB",
                    "  memoryBudget: 64MiB\n  api: { listen: '0.0.0.0:9740' }"),
                "appliance.api.listen", "the API on TCP (0.0.0.0:9740) needs appliance.api.tokenFile: any local user " +
                    "can open a TCP port, and this one is not on loopback; or listen on a Unix socket (the default)"),
            arguments("unknown port type", BASE.replace("- name: eth1", "- name: eth1\n      type: xdp"),
                "appliance.ports[0].type", "'xdp' is not one of af_packet or af_xdp"),
            arguments("port type not a string", BASE.replace("- name: eth1", "- name: eth1\n      type: [af_xdp]"),
                "appliance.ports[0].type", "expected one of af_packet or af_xdp, got a list"),
            arguments("segmentation offload a string", BASE.replace("- name: eth1",
                    "- name: eth1\n      segmentation_offload: 'true'"),
                "appliance.ports[0].segmentation_offload", "expected true or false, got the string 'true'"),
            arguments("segmentation offload a number", BASE.replace("- name: eth1",
                    "- name: eth1\n      segmentation_offload: 1"),
                "appliance.ports[0].segmentation_offload", "expected true or false, got the number 1"),
            arguments("segmentation offload on an AF_XDP port", BASE.replace("- name: eth1",
                    "- name: eth1\n      type: af_xdp\n      segmentation_offload: true"),
                "appliance.ports[0].segmentation_offload", "segmentation offload needs an af_packet port " +
                    "(PACKET_VNET_HDR), but port 'eth1' is af_xdp"),
            arguments("unknown port key", BASE.replace("- name: eth1", "- name: eth1\n      offload: true"),
                "appliance.ports[0].offload", "unknown key (expected one of mtu, name, segmentation_offload, type)"),
            arguments("bad idle strategy", BASE.replace("  memoryBudget: 64MiB",
                    "  memoryBudget: 64MiB\n  dataplane: { idleStrategy: spin }"),
                "appliance.dataplane.idleStrategy", "'spin' is not one of busy-spin, yield, backoff, sleep or poll"),
            arguments("bad listen address", BASE.replace("  memoryBudget: 64MiB",
                    "  memoryBudget: 64MiB\n  api: { listen: '::1:9740' }"),
                "appliance.api.listen", "IPv6 addresses need brackets, e.g. [::1]:9740"),
            arguments("bad size", BASE.replace("memoryBudget: 64MiB", "memoryBudget: lots"),
                "appliance.memoryBudget", "'lots' is not a size like 512MiB, 2GiB or 1048576"),
            arguments("bad mac", BASE.replace("{ rank: 0, ip: 10.0.0.1 }", "{ rank: 0, ip: 10.0.0.1, mac: 02:00 }"),
                "jobs[0].rings[0].members[0].mac", "'02:00' is not a MAC address like 02:00:00:00:00:01"),
            arguments("qpn over 24 bits", BASE.replace("{ rank: 0, ip: 10.0.0.1 }",
                    "{ rank: 0, ip: 10.0.0.1, qpn: 16777216 }"),
                "jobs[0].rings[0].members[0].qpn", "QPN 16777216 is not in 0..0xffffff (24 bits)"),
            arguments("duplicate job name", BASE.replace("name: b", "name: a"),
                "jobs[1].name", "duplicate job name 'a' (also jobs[0].name)"),
            arguments("relative capture directory", BASE.replace("  memoryBudget: 64MiB",
                    "  memoryBudget: 64MiB\n  captureDirectory: captures"),
                "appliance.captureDirectory", "'captures' is not an absolute path"),
            arguments("no ports", BASE.replace("  ports:\n    - name: eth1\n", "  ports: []\n"),
                "appliance.ports", "the appliance needs at least one port"),
            arguments("not YAML", "appliance: [", "", null));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("brokenConfigs")
    void shouldRefuseBrokenConfigWithPathAndReason(
        final String name, final String yaml, final String path, final String reason)
    {
        final ConfigException ex = catchThrowableOfType(ConfigException.class, () -> ConfigLoader.parse(yaml));

        assertThat(ex).as(name).isNotNull();
        if (reason == null)
        {
            assertThat(ex.errors()).singleElement().satisfies(error -> assertThat(error.path()).isEqualTo(path));
        }
        else
        {
            // The first error is the one the case provokes; a broken rank also leaves a gap, reported after it.
            assertThat(ex.errors()).as(name).first().isEqualTo(new ConfigError(path, reason));
            assertThat(ex.errors()).as(name).hasSizeLessThanOrEqualTo(2);
        }
    }

    @Test
    void shouldReportEveryErrorInDocumentOrder()
    {
        final String yaml = BASE
            .replace("ip: 10.0.0.2", "ip: 10.0.0.999")
            .replace("window: 4", "window: 0")
            .replace("name: eth1", "name: eth1\n      speed: 100");

        final ConfigException ex = catchThrowableOfType(ConfigException.class, () -> ConfigLoader.parse(yaml));

        assertThat(ex.errors()).extracting(ConfigError::path).containsExactly(
            "appliance.ports[0].speed", "jobs[0].rings[0].members[1].ip", "jobs[1].rings[0].window");
        assertThat(ex.getMessage()).startsWith("3 configuration errors")
            .contains("jobs[0].rings[0].members[1].ip: not an IPv4 or IPv6 address");
    }

    @Test
    void shouldReportMissingRanksWhenRanksHaveAGap()
    {
        final String yaml = BASE.replace("{ rank: 3, ip: 10.0.1.4 }", "{ rank: 5, ip: 10.0.1.4 }");

        final ConfigException ex = catchThrowableOfType(ConfigException.class, () -> ConfigLoader.parse(yaml));

        assertThat(ex.errors()).containsExactly(
            new ConfigError("jobs[1].rings[0].members[3].rank", "rank 5 is not in 0..3 (ranks are 0..worldSize-1)"),
            new ConfigError("jobs[1].rings[0].members", "ranks must be exactly 0..3; missing [3]"));
    }

    @Test
    void shouldRefuseUnknownInterfaceOnlyWhenCheckingTheHost() throws ConfigException
    {
        final String yaml = BASE.replace("name: eth1", "name: nr-nosuch0");

        assertThat(ConfigLoader.parse(yaml, ValidationOptions.DOCUMENT_ONLY).appliance().ports()).hasSize(1);
        final ConfigException ex = catchThrowableOfType(ConfigException.class,
            () -> ConfigLoader.parse(yaml, ValidationOptions.ON_THIS_HOST));
        assertThat(ex.errors()).containsExactly(
            new ConfigError("appliance.ports[0].name", "no network interface 'nr-nosuch0' on this host"));
    }

    @Test
    void shouldAcceptLoopbackInterfaceWhenCheckingTheHost() throws ConfigException
    {
        final NetreduceConfig config = ConfigLoader.parse(BASE.replace("name: eth1", "name: lo"),
            ValidationOptions.ON_THIS_HOST);

        assertThat(config.appliance().ports()).extracting(PortConfig::name).containsExactly("lo");
    }

    @Test
    void shouldNameTheInterfacesLargerMtuWhenARingDoesNotFitTheConfiguredOne()
    {
        // lo's MTU (65536) is larger than the default 1500 the port was left at: the operator is told both.
        final String yaml = BASE.replace("name: eth1", "name: lo").replace("payloadSize: 1024\n        pmtu: 1024",
            "payloadSize: 4096\n        pmtu: 4096");

        final ConfigException ex = catchThrowableOfType(ConfigException.class,
            () -> ConfigLoader.parse(yaml, ValidationOptions.ON_THIS_HOST));
        assertThat(ex.errors()).containsExactly(new ConfigError("jobs[0].rings[0].pmtu", "PMTU 4096 plus the RoCEv2 " +
            "headers (64 bytes) does not fit the MTU 1500 of port lo: its frames could not reach the appliance (the " +
            "configured MTU: appliance.ports[0].mtu, 1500 unless set; interface 'lo' has " +
            InterfaceMtu.of("lo").orElseThrow() + " on this host: set mtu to 9216)"));
        // Without the host's interfaces, the same error without the hint.
        final ConfigException documentOnly = catchThrowableOfType(ConfigException.class,
            () -> ConfigLoader.parse(yaml, ValidationOptions.DOCUMENT_ONLY));
        assertThat(documentOnly.errors()).extracting(ConfigError::message).singleElement().asString()
            .endsWith("its frames could not reach the appliance");
    }

    @Test
    void shouldRefuseAPortMtuLargerThanItsInterfacesOnThisHost() throws IOException, ConfigException
    {
        // Any interface of this host with an MTU under the largest accepted (a VM's eth0, an ifb): configured one
        // byte above it.
        final String small = Files.readAllLines(Path.of("/proc/self/net/dev")).stream()
            .filter(line -> line.indexOf(':') > 0).map(line -> line.substring(0, line.indexOf(':')).trim())
            .filter(name -> InterfaceMtu.of(name).orElse(Integer.MAX_VALUE) < PortConfig.MAX_MTU &&
                InterfaceMtu.of(name).getAsInt() >= PortConfig.MIN_MTU)
            .findFirst().orElse(null);
        assumeTrue(small != null, "no interface here with an MTU in 576..9215");
        final int mtu = InterfaceMtu.of(small).getAsInt();
        final String yaml = BASE.replace("name: eth1", "name: " + small + "\n      mtu: " + (mtu + 1));

        final ConfigException ex = catchThrowableOfType(ConfigException.class,
            () -> ConfigLoader.parse(yaml, ValidationOptions.ON_THIS_HOST));
        assertThat(ex.errors()).containsExactly(new ConfigError("appliance.ports[0].mtu", "MTU " + (mtu + 1) +
            " is larger than interface '" + small + "' has on this host (" + mtu + "): frames that long could not " +
            "be sent; raise the interface's MTU or lower this"));
        assertThat(ConfigLoader.parse(BASE.replace("name: eth1", "name: " + small + "\n      mtu: " + mtu),
            ValidationOptions.ON_THIS_HOST).appliance().ports().getFirst().mtu()).isEqualTo(mtu);
    }

    @Test
    void shouldRefuseAnEndlessFileWithoutReadingItAll()
    {
        assertThatThrownBy(() -> ConfigLoader.load(Path.of("/dev/zero")))
            .isInstanceOf(ConfigException.class)
            .hasMessageContaining("/dev/zero is larger than 4 MiB: not a netreduce configuration");
    }

    @Test
    void shouldNameLineAndColumnOfTheFirstByteThatIsNotUtf8(@TempDir final Path dir) throws IOException
    {
        final Path file = dir.resolve("latin1.yaml");
        Files.write(file, "appliance:\n  ports:\n    - name: eth\u00e91\n".getBytes(StandardCharsets.ISO_8859_1));
        assertThatThrownBy(() -> ConfigLoader.load(file))
            .isInstanceOf(ConfigException.class)
            .hasMessageContaining("is not UTF-8: byte 0xE9 at line 3, column 16");
    }

    @Test
    void shouldRefuseEmptyDocument()
    {
        final ConfigException ex = catchThrowableOfType(ConfigException.class, () -> ConfigLoader.parse("  \n"));

        assertThat(ex.errors()).containsExactly(new ConfigError("", "the configuration is empty"));
    }

    @Test
    void shouldRefuseDuplicateKeys()
    {
        final ConfigException ex = catchThrowableOfType(ConfigException.class,
            () -> ConfigLoader.parse(BASE + "jobs: []\n"));

        assertThat(ex.errors()).singleElement().satisfies(error ->
            assertThat(error.message()).contains("line").contains("Duplicate field 'jobs'"));
    }

    @Test
    void shouldReportMissingFileAsConfigError()
    {
        final ConfigException ex = catchThrowableOfType(ConfigException.class,
            () -> ConfigLoader.load(Path.of("/nonexistent/netreduce.yaml")));

        assertThat(ex.errors()).singleElement().satisfies(error ->
            assertThat(error.message()).startsWith("cannot read /nonexistent/netreduce.yaml"));
    }

    @Test
    void shouldParseOneJobWithPathsRelativeToTheJob() throws ConfigException
    {
        final String job = """
            {"name": "c", "rings": [{"id": 3, "elementType": "int32", "window": 2, "msgLen": 4,
              "payloadSize": 256, "pmtu": 256, "members": [{"rank": 0, "ip": "fd00::1"}, {"rank": 1, "ip": "::1"}]}]}
            """;

        assertThat(ConfigLoader.parseJob(job).rings().getFirst().members().get(1).address().getHostAddress())
            .isEqualTo("0:0:0:0:0:0:0:1");

        final ConfigException ex = catchThrowableOfType(ConfigException.class,
            () -> ConfigLoader.parseJob(job.replace("\"::1\"", "\"::g\"").replace("\"window\": 2", "\"window\": 3")));
        assertThat(ex.errors()).extracting(ConfigError::toString).containsExactly(
            "rings[0].window: window 3 is not a power of two in 1..128 " +
                "(MsgID is 8 bits and the aggregator index is MsgID % 2N)",
            "rings[0].members[1].ip: not an IPv4 or IPv6 address");
    }
}
