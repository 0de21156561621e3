package io.netreduce.daemon;

import io.netreduce.controlplane.api.ApiClient;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.ValidationOptions;
import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.testing.RingWorker;
import com.fasterxml.jackson.databind.JsonNode;
import io.netreduce.protocol.port.MemoryPort;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * One topology file for a job across racks, given to every appliance: each daemon installs the ring with the place
 * its name gives it (a rack's leaf, the spine), or skips the job when its name has no role in it.
 */
class MultiRackDaemonTest
{
    static final String TOPOLOGY = """
        appliance:
          ports:
            - name: mem0
          memoryBudget: 64MiB
          api:
            listen: 127.0.0.1:0
            tokenFile: /tmp/netreduce-test-api.token
          metrics:
            listen: 127.0.0.1:0
        jobs:
          - name: flat
            rings:
              - id: 3
                elementType: fp32
                window: 2
                msgLen: 3
                payloadSize: 256
                pmtu: 1024
                members:
                  - { rank: 0, ip: 10.0.9.1 }
                  - { rank: 1, ip: 10.0.9.2 }
          - name: racked
            rings:
              - id: 7
                elementType: fp32
                window: 2
                msgLen: 3
                payloadSize: 256
                pmtu: 1024
                members:
                  - { rank: 0, ip: 10.0.1.1 }
                  - { rank: 1, ip: 10.0.1.2 }
                  - { rank: 2, ip: 10.0.2.1 }
                  - { rank: 3, ip: 10.0.2.2 }
                spine: spine
                racks:
                  - { leaf: leaf-a, ranks: [0, 1] }
                  - { leaf: leaf-b, ranks: [2, 3] }
        """;

    @Test
    void shouldInstallTheLeafRingOfItsRackOnALeaf(@TempDir final Path dir) throws Exception
    {
        final List<RingDefinition> installed = installedAs("leaf-b", dir);

        assertThat(installed).extracting(RingDefinition::ringId).containsExactly(3, 7);
        final RingDefinition leaf = installed.get(1);
        assertThat(leaf.hierarchy()).isEqualTo(Hierarchy.leaf(List.of(1, 3), 1));
        assertThat(leaf.worldSize()).isEqualTo(4);
        assertThat(leaf.aggregatedRanks()).isEqualTo(2);
        assertThat(leaf.jobName()).isEqualTo("racked");
        assertThat(installed.getFirst().hierarchy()).isEqualTo(Hierarchy.FLAT);
    }

    @Test
    void shouldInstallTheSpineRingOnTheSpine(@TempDir final Path dir) throws Exception
    {
        final List<RingDefinition> installed = installedAs("spine", dir);

        final RingDefinition spine = installed.get(1);
        assertThat(spine.hierarchy()).isEqualTo(Hierarchy.spine(List.of(1, 3)));
        assertThat(spine.aggregatedRanks()).isEqualTo(2);
        assertThat(spine.worldSize()).isEqualTo(4);
    }

    @Test
    void shouldSkipAJobWhoseRingsHaveNoRoleForThisAppliance(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("topology.yaml");
        Files.writeString(file, TOPOLOGY.replace("  ports:", "  name: leaf-c\n  ports:"));
        final NetreduceConfig config = ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY);
        final PacketDataplane dataplane = new PacketDataplane(portConfig -> new MemoryPort("mem0"));

        try (Daemon daemon = Daemon.start(config, () -> ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY),
                ValidationOptions.DOCUMENT_ONLY, dataplane);
            ApiClient api = new ApiClient(daemon.apiAddress(), Duration.ofSeconds(5), Daemon.apiToken()))
        {
            assertThat(dataplane.installedRings()).extracting(RingDefinition::ringId).containsExactly(3);
            assertThat(api.send("GET", "/v1/jobs/racked", null, null).status()).isEqualTo(404);
            assertThat(api.send("GET", "/v1/jobs/flat", null, null).status()).isEqualTo(200);
        }
    }

    @Test
    void shouldTakeItsRoleFromTheNameOptionOverTheFile(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("topology.yaml");
        Files.writeString(file, TOPOLOGY.replace("  ports:", "  name: leaf-a\n  ports:"));

        final DaemonTest.Run asSpine = DaemonTest.run("daemon", "--config", file.toString(), "--check",
            "--skip-interface-check", "--name", "spine");
        assertThat(asSpine.status()).isZero();
        assertThat(asSpine.out()).contains("valid (2 job(s), 2 ring(s))");

        final DaemonTest.Run elsewhere = DaemonTest.run("daemon", "--config", file.toString(), "--check",
            "--skip-interface-check", "--name", "leaf-z");
        assertThat(elsewhere.status()).isZero();
        assertThat(elsewhere.out()).contains("valid (2 job(s), 2 ring(s); as 'leaf-z' it installs 1 ring(s) of 1 job(s))");

        final DaemonTest.Run badName = DaemonTest.run("daemon", "--config", file.toString(), "--check",
            "--skip-interface-check", "--name", "leaf z");
        assertThat(badName.status()).isEqualTo(DaemonCommand.EXIT_CONFIG);
        assertThat(badName.err()).contains("--name: appliance name 'leaf z' must be 1-64 characters");
    }

    @Test
    void shouldCheckTheExampleTopologyForEveryRole() throws Exception
    {
        final Path example = Path.of(System.getProperty("netreduce.repo.root", ".."))
            .resolve("config/two-racks.yaml");
        for (final String name : List.of("leaf-a", "leaf-b", "spine"))
        {
            final DaemonTest.Run check = DaemonTest.run("daemon", "--config", example.toString(), "--check",
                "--skip-interface-check", "--name", name);
            assertThat(check.status()).as(name + ": " + check.err()).isZero();
            assertThat(check.out()).as(name).contains("valid (1 job(s), 1 ring(s))");
        }
    }

    @Test
    void shouldListTheLeafsCttEntriesAndLearnTheLeavingConnectionFromItsRanksPackets(@TempDir final Path dir)
        throws Exception
    {
        final Path file = dir.resolve("topology.yaml");
        Files.writeString(file, TOPOLOGY.replace("  ports:", "  name: leaf-a\n  ports:"));
        final NetreduceConfig config = ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY);
        final MemoryPort port = new MemoryPort("mem0");
        final PacketDataplane dataplane = new PacketDataplane(portConfig -> port);

        try (Daemon daemon = Daemon.start(config, () -> ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY),
                ValidationOptions.DOCUMENT_ONLY, dataplane);
            ApiClient api = new ApiClient(daemon.apiAddress(), Duration.ofSeconds(5), Daemon.apiToken());
            ApiClient metrics = new ApiClient(daemon.metricsAddress(), Duration.ofSeconds(5)))
        {
            // Before any traffic: the up entry (ranks 0, 1 -> partial on 1 -> 2) and the down entry (the spine's
            // result on 3 -> 0, onto 0 -> 1 and 3 -> 0 itself), neither connection learnt yet.
            final JsonNode before = json(api.send("GET", "/v1/tables/ctt", null, null).body());
            assertThat(before).hasSize(2);
            assertThat(before.get(0).path("role").asText()).isEqualTo("up");
            assertThat(before.get(0).path("connection").path("srcIp").asText()).isEqualTo("10.0.1.2");
            assertThat(before.get(0).path("connection").path("dstIp").asText()).isEqualTo("10.0.2.1");
            assertThat(before.get(0).path("learned").asBoolean()).isFalse();
            assertThat(before.get(1).path("role").asText()).isEqualTo("down");
            assertThat(before.get(1).path("populated").asText()).isEqualTo("first-packet");
            assertThat(before.get(1).path("connection").path("rank").asInt()).isEqualTo(3);
            assertThat(before.get(1).path("leaves").findValuesAsText("rank")).containsExactly("0", "3");

            // Ranks 0 and 1 send message 0: the leaf learns 1 -> 2 and sends the rack's partial up on it.
            final RingDefinition ring = dataplane.installedRings().stream().filter(r -> r.ringId() == 7)
                .findFirst().orElseThrow();
            final List<byte[]> sent = new java.util.ArrayList<>();
            for (int rank = 0; rank < 2; rank++)
            {
                final RingWorker worker = RingWorker.of(ring, rank, 1000 * (rank + 1));
                sent.addAll(worker.message(0, new byte[worker.gradientBytes()]));
            }
            sent.forEach(port::inject);
            final List<byte[]> up = new java.util.ArrayList<>();
            final long deadline = System.nanoTime() + 10_000_000_000L;
            while (up.size() < ring.msgLen() && System.nanoTime() < deadline)
            {
                up.addAll(port.drainSent());
                Thread.sleep(5);
            }
            assertThat(up).as("one partial packet per position, up on 1 -> 2").hasSize(ring.msgLen());

            final JsonNode after = json(api.send("GET", "/v1/tables/ctt", null, null).body());
            assertThat(after.get(0).path("learned").asBoolean()).isTrue();
            assertThat(after.get(0).path("dstQpn").asInt()).isEqualTo(RingWorker.defaultReceiveQp(2));
            assertThat(after.get(0).path("psn0").asLong()).isEqualTo(2000);
            assertThat(after.get(1).path("learned").asBoolean()).isFalse();
            assertThat(metrics.send("GET", "/metrics", null, null).body())
                .contains("netreduce_ctt_entries{job=\"racked\",ring=\"7\",role=\"up\",tier=\"leaf\"} 1.0")
                .contains("netreduce_ctt_entries_learned{job=\"racked\",ring=\"7\",role=\"up\",tier=\"leaf\"} 1.0")
                .contains("netreduce_ctt_entries_learned{job=\"racked\",ring=\"7\",role=\"down\",tier=\"leaf\"} 0.0");
        }
    }

    @Test
    void shouldListOneCttEntryPerRackOnTheSpineAndNoneOnAFlatAppliance(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("topology.yaml");
        Files.writeString(file, TOPOLOGY.replace("  ports:", "  name: spine\n  ports:"));
        final NetreduceConfig config = ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY);
        final PacketDataplane dataplane = new PacketDataplane(portConfig -> new MemoryPort("mem0"));

        try (Daemon daemon = Daemon.start(config, () -> ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY),
                ValidationOptions.DOCUMENT_ONLY, dataplane);
            ApiClient api = new ApiClient(daemon.apiAddress(), Duration.ofSeconds(5), Daemon.apiToken()))
        {
            final JsonNode ctt = json(api.send("GET", "/v1/tables/ctt", null, null).body());
            assertThat(ctt).hasSize(2);
            assertThat(ctt.findValuesAsText("tier")).containsOnly("spine");
            assertThat(ctt.findValuesAsText("populated")).containsOnly("install");
            assertThat(ctt.get(0).path("connection").path("rank").asInt()).isEqualTo(1);
            assertThat(ctt.get(1).path("connection").path("rank").asInt()).isEqualTo(3);
            assertThat(ctt.get(1).path("leaves").findValuesAsText("rank")).containsExactly("1", "3");

            assertThat(api.send("DELETE", "/v1/jobs/racked", null, null).status()).isEqualTo(200);
            assertThat(json(api.send("GET", "/v1/tables/ctt", null, null).body())).isEmpty();
        }
    }

    private static JsonNode json(final String body) throws java.io.IOException
    {
        return new com.fasterxml.jackson.databind.ObjectMapper().readTree(body);
    }

    private static List<RingDefinition> installedAs(final String name, final Path dir) throws Exception
    {
        final Path file = dir.resolve("topology.yaml");
        Files.writeString(file, TOPOLOGY.replace("  ports:", "  name: " + name + "\n  ports:"));
        final NetreduceConfig config = ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY);
        final PacketDataplane dataplane = new PacketDataplane(portConfig -> new MemoryPort("mem0"));
        try (Daemon daemon = Daemon.start(config, () -> ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY),
            ValidationOptions.DOCUMENT_ONLY, dataplane))
        {
            return dataplane.installedRings().stream().sorted(Comparator.comparingInt(RingDefinition::ringId))
                .toList();
        }
    }
}
