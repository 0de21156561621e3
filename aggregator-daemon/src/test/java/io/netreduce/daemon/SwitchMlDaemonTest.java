package io.netreduce.daemon;

import io.netreduce.controlplane.api.ApiClient;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.ValidationOptions;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.SwitchMlHeader;
import io.netreduce.protocol.writer.SwitchMlPacketWriter;
import io.netreduce.switchml.controller.SwitchMlControllerClient;
import io.netreduce.switchml.controller.UdpSessionReply;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The daemon with its real dataplane on a memory port serving a SwitchML job declared in its configuration: the
 * workers' packets are summed and answered from the appliance's SwitchML address, the job shows in the API, ctl's
 * view and the metrics, and a reload that drops the job stops the aggregation.
 */
@Timeout(60)
class SwitchMlDaemonTest
{
    private static final String APPLIANCE = """
        appliance:
          ports:
            - name: mem0
          memoryBudget: 64MiB
          api:
            listen: 127.0.0.1:0
            tokenFile: /tmp/netreduce-test-api.token
          metrics:
            listen: 127.0.0.1:0
          switchml:
            mac: 02:77:00:00:00:fe
            ip: 10.77.0.254
        """;
    private static final String JOB = """
        jobs:
          - name: sml
            switchml:
              elementsPerPacket: 64
              poolSize: 16
              workers:
                - { rank: 0, ip: 10.77.0.1 }
                - { rank: 1, ip: 10.77.0.2, mac: "02:77:00:00:00:02" }
        """;
    private static final long APPLIANCE_MAC = EthernetHeader.parseMac("02:77:00:00:00:fe");
    private static final int APPLIANCE_IP = 0x0A_4D_00_FE;

    private final MemoryPort port = new MemoryPort("mem0");

    @Test
    void shouldSumAConfiguredSwitchMlJobShowItAndStopOnceReloadedWithoutIt(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("netreduce.yaml");
        Files.writeString(file, APPLIANCE + JOB);
        final NetreduceConfig config = ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY);
        final PacketDataplane dataplane = new PacketDataplane(portConfig -> port);

        try (Daemon daemon = Daemon.start(config, () -> ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY),
                ValidationOptions.DOCUMENT_ONLY, dataplane);
            ApiClient api = new ApiClient(daemon.apiAddress(), Duration.ofSeconds(5), Daemon.apiToken());
            ApiClient metrics = new ApiClient(daemon.metricsAddress(), Duration.ofSeconds(5)))
        {
            port.inject(packet(0, 0x02_77_00_00_00_01L, 3));
            port.inject(packet(1, 0x02_77_00_00_00_02L, 4));
            final List<byte[]> results = awaitFrames(2);
            assertThat(results).hasSize(2);
            for (final byte[] result : results)
            {
                final UnsafeBuffer buffer = new UnsafeBuffer(result);
                assertThat(EthernetHeader.srcMac(buffer, 0)).isEqualTo(APPLIANCE_MAC);
                for (int e = 0; e < 64; e++)
                {
                    assertThat(SwitchMlPacketWriter.element(buffer, 0, e)).isEqualTo(7 * (e + 1));
                }
            }
            final String jobs = api.send("GET", "/v1/switchml", null, null).body();
            assertThat(jobs).contains("\"name\":\"sml\"").contains("\"origin\":\"config\"")
                .contains("\"completions\":1").contains("\"workers\":[\"10.77.0.1\",\"10.77.0.2\"]");
            assertThat(metrics.send("GET", "/metrics", null, null).body())
                .contains("netreduce_switchml_completions_total{job=\"sml\"} 1.0");

            // A packet from worker 1's address with another MAC than configured never reaches a slot.
            port.inject(packet(1, 0x02_77_00_00_00_99L, 4));
            assertThat(awaitFrames(1)).isEmpty();
            assertThat(api.send("GET", "/v1/switchml", null, null).body()).contains("\"notMemberDrops\":1");

            Files.writeString(file, APPLIANCE + "jobs: []\n");
            daemon.reload();
            assertThat(api.send("GET", "/v1/switchml", null, null).body()).isEqualTo("[]");
            // No job answers from the appliance's address any more: the packets are not summed but passed on as
            // they came, counted.
            final byte[] first = packet(0, 0x02_77_00_00_00_01L, 3);
            final byte[] second = packet(1, 0x02_77_00_00_00_02L, 4);
            port.inject(first);
            port.inject(second);
            assertThat(awaitFrames(2)).containsExactly(first, second);
            assertThat(api.send("GET", "/v1/counters", null, null).body())
                .contains("\"netreduce_dataplane_pass_through_switchml_no_job\":{\"value\":2");
        }
    }

    @Test
    void shouldInstallASessionThatWorkersOpenThroughTheControllerAndSumItsPackets(@TempDir final Path dir)
        throws Exception
    {
        final Path file = dir.resolve("netreduce.yaml");
        Files.writeString(file, APPLIANCE + """
                controller:
                  listen: 127.0.0.1:0
                  allow: [127.0.0.0/8]
            """ + JOB.replace("10.77.0.1 }", "10.77.0.11 }").replace("10.77.0.2,", "10.77.0.12,"));
        final NetreduceConfig config = ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY);
        final PacketDataplane dataplane = new PacketDataplane(portConfig -> port);

        try (Daemon daemon = Daemon.start(config, () -> ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY),
                ValidationOptions.DOCUMENT_ONLY, dataplane);
            ApiClient api = new ApiClient(daemon.apiAddress(), Duration.ofSeconds(5), Daemon.apiToken()))
        {
            final int controllerPort = dataplane.switchMlControllerAddress().getPort();
            final java.util.concurrent.ExecutorService ranks = java.util.concurrent.Executors.newFixedThreadPool(2);
            final List<java.util.concurrent.Future<UdpSessionReply>> replies = new ArrayList<>();
            for (int rank = 0; rank < 2; rank++)
            {
                final int r = rank;
                replies.add(ranks.submit(() ->
                {
                    try (SwitchMlControllerClient client = new SwitchMlControllerClient("127.0.0.1", controllerPort))
                    {
                        // MTU_256: 64 elements per packet, as the published client asks for 64.
                        return client.register(r, 2, 0x02_77_00_00_00_01L + r, 0x0A_4D_00_01 + r, 1);
                    }
                }));
            }
            for (final var reply : replies)
            {
                assertThat(reply.get(30, java.util.concurrent.TimeUnit.SECONDS))
                    .isEqualTo(new UdpSessionReply(APPLIANCE_MAC, APPLIANCE_IP));
            }
            ranks.shutdown();
            assertThat(api.send("GET", "/v1/switchml", null, null).body()).contains("\"origin\":\"controller\"")
                .contains("\"workers\":[\"10.77.0.1\",\"10.77.0.2\"]").contains("\"name\":\"session-");

            port.inject(packet(0, 0x02_77_00_00_00_01L, 3));
            port.inject(packet(1, 0x02_77_00_00_00_02L, 4));
            final List<byte[]> results = awaitFrames(2);
            assertThat(results).hasSize(2);
            assertThat(SwitchMlPacketWriter.element(new UnsafeBuffer(results.getFirst()), 0, 63)).isEqualTo(7 * 64);

            // A worker of the configured job cannot be taken into a session.
            try (SwitchMlControllerClient client = new SwitchMlControllerClient("127.0.0.1", controllerPort))
            {
                assertThatThrownBy(() -> client.udpSession(77, 0, 1, 0x02_77_00_00_00_0BL, 0x0A_4D_00_0B, 1))
                    .hasMessageContaining("overlap job sml of the configuration");
            }
        }
    }

    private static byte[] packet(final int worker, final long mac, final int factor)
    {
        final byte[] frame = new byte[SwitchMlPacketWriter.frameLength(64)];
        final UnsafeBuffer buffer = new UnsafeBuffer(frame);
        SwitchMlPacketWriter.writeHeaders(buffer, 0, mac, APPLIANCE_MAC, 0x0A_4D_00_01 + worker, APPLIANCE_IP,
            40_000 + worker, SwitchMlHeader.PORT_BASE, 0x11, 0, 0, 0, 0, 64);
        final int[] values = new int[64];
        for (int e = 0; e < 64; e++)
        {
            values[e] = factor * (e + 1);
        }
        SwitchMlPacketWriter.writeElements(buffer, 0, values, 0, 64);
        return frame;
    }

    private List<byte[]> awaitFrames(final int count) throws InterruptedException
    {
        final List<byte[]> frames = new ArrayList<>();
        final long deadline = System.nanoTime() + (count == 1 ? 300_000_000L : 10_000_000_000L);
        while (frames.size() < count && System.nanoTime() < deadline)
        {
            frames.addAll(port.drainSent());
            Thread.sleep(5);
        }
        return frames;
    }
}
