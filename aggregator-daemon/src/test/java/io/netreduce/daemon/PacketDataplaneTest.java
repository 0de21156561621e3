package io.netreduce.daemon;

import io.netreduce.controlplane.api.ApiClient;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.RingRef;
import io.netreduce.controlplane.config.ValidationOptions;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.support.ProcStat;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.icrc.Icrc;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The daemon with its real dataplane on a memory port: rings configured or removed through the control plane
 * change what the dataplane does to the same traffic.
 */
@Timeout(60)
class PacketDataplaneTest
{
    private static final String CONFIG = """
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
          - name: keep
            rings:
              - id: 7
                elementType: fp32
                window: 2
                msgLen: 3
                payloadSize: 256
                pmtu: 1024
                members:
                  - { rank: 0, ip: 10.0.0.1 }
                  - { rank: 1, ip: 10.0.0.2 }
                  - { rank: 2, ip: 10.0.0.3 }
          - name: drop
            rings:
              - id: 8
                elementType: fp32
                window: 2
                msgLen: 3
                payloadSize: 256
                pmtu: 1024
                members:
                  - { rank: 0, ip: 10.0.1.1 }
                  - { rank: 1, ip: 10.0.1.2 }
        """;

    private final MemoryPort port = new MemoryPort("mem0");
    private final Icrc icrc = new Icrc();

    @Test
    void shouldAggregateConfiguredRingAndPassItThroughOnceRemovedThroughTheApi(@TempDir final Path dir)
        throws Exception
    {
        final Path file = dir.resolve("netreduce.yaml");
        Files.writeString(file, CONFIG);
        final NetreduceConfig config = ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY);
        final PacketDataplane dataplane = new PacketDataplane(portConfig -> port);

        try (Daemon daemon = Daemon.start(config, () -> ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY),
                ValidationOptions.DOCUMENT_ONLY, dataplane);
            ApiClient api = new ApiClient(daemon.apiAddress(), Duration.ofSeconds(5), Daemon.apiToken());
            ApiClient metrics = new ApiClient(daemon.metricsAddress(), Duration.ofSeconds(5)))
        {
            final RingDefinition ring = PacketDataplane.toDataplane(
                new RingRef("drop", config.job("drop").orElseThrow().rings().getFirst()));
            final RingWorker[] workers = { RingWorker.of(ring, 0, 100), RingWorker.of(ring, 1, 5000) };
            final int elements = workers[0].gradientBytes() / Float.BYTES;

            // Message 0 while ring 8 is installed: every connection gets the element-wise sum.
            final List<byte[]> sent = new ArrayList<>();
            for (int rank = 0; rank < 2; rank++)
            {
                sent.addAll(workers[rank].message(0, gradient(elements, rank + 1)));
            }
            sent.forEach(port::inject);
            final List<byte[]> results = awaitFrames(sent.size());
            assertThat(results).hasSize(sent.size());
            assertEveryConnectionGotTheSum(results, 2, elements, 3.0f);
            assertThat(metrics.send("GET", "/metrics", null, null).body())
                .contains("netreduce_ring_aggregations_completed_total{job=\"drop\",ring=\"8\"} " +
                    (sent.size() / 2) + ".0");

            assertThat(api.send("GET", "/v1/tables/clt", null, null).body()).contains("\"srcIp\":\"10.0.1.1\"");

            // Remove the job through the API: the same kind of traffic now passes through untouched.
            assertThat(api.send("DELETE", "/v1/jobs/drop", null, null).status()).isEqualTo(200);
            final List<byte[]> later = new ArrayList<>();
            for (int rank = 0; rank < 2; rank++)
            {
                later.addAll(workers[rank].message(1, gradient(elements, rank + 1)));
            }
            later.forEach(port::inject);
            final List<byte[]> passed = awaitFrames(later.size());
            assertThat(passed).usingElementComparator(java.util.Arrays::compare).containsExactlyElementsOf(later);

            // The other job's ring was never touched.
            assertThat(api.send("GET", "/v1/rings/7", null, null).status()).isEqualTo(200);
            assertThat(api.send("GET", "/v1/rings/7/occupancy", null, null).status()).isEqualTo(200);
            assertThat(api.send("GET", "/v1/tables/clt", null, null).body()).doesNotContain("10.0.1.1");
        }
    }

    @Test
    void shouldRunTheLaneThreadAtTheConfiguredNiceValue(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("netreduce.yaml");
        // Raising the nice value needs no privilege, so this runs as any user.
        Files.writeString(file,
            CONFIG.replace("  memoryBudget: 64MiB", "  memoryBudget: 64MiB\n  dataplane: { laneNice: 5 }"));
        final NetreduceConfig config = ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY);

        try (Daemon daemon = Daemon.start(config, () -> ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY),
            ValidationOptions.DOCUMENT_ONLY, new PacketDataplane(portConfig -> port)))
        {
            final List<Integer> laneNices = new ArrayList<>();
            try (var tasks = Files.list(Path.of("/proc/self/task")))
            {
                for (final Path task : tasks.toList())
                {
                    if (Files.readString(task.resolve("comm")).strip().equals("netreduce-datap"))
                    {
                        laneNices.add(ProcStat.nice(task));
                    }
                }
            }
            assertThat(laneNices).as("the lane thread's nice value").contains(5);
        }
    }

    @Test
    void shouldKeepAnotherRingsInFlightAggregationAcrossAReloadThatChangesOneRing(@TempDir final Path dir)
        throws Exception
    {
        final Path file = dir.resolve("netreduce.yaml");
        Files.writeString(file, CONFIG);
        final NetreduceConfig config = ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY);
        final PacketDataplane dataplane = new PacketDataplane(portConfig -> port);

        try (Daemon daemon = Daemon.start(config, () -> ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY),
                ValidationOptions.DOCUMENT_ONLY, dataplane))
        {
            final RingDefinition ring = PacketDataplane.toDataplane(
                new RingRef("keep", config.job("keep").orElseThrow().rings().getFirst()));
            final RingWorker[] workers =
                { RingWorker.of(ring, 0, 10), RingWorker.of(ring, 1, 20), RingWorker.of(ring, 2, 30) };
            final int elements = workers[0].gradientBytes() / Float.BYTES;

            // Ranks 0 and 1 of ring 7 have sent message 0; rank 2 has not: the aggregation is in flight.
            final List<byte[]> early = new ArrayList<>();
            early.addAll(workers[0].message(0, gradient(elements, 1)));
            early.addAll(workers[1].message(0, gradient(elements, 2)));
            early.forEach(port::inject);
            Thread.sleep(200);
            assertThat(port.drainSent()).isEmpty();

            // Reload with ring 8 changed (window 2 -> 4): ring 8 is re-installed, ring 7 must not be touched.
            Files.writeString(file, CONFIG.replaceFirst("(id: 8\\n\\s+elementType: fp32\\n\\s+)window: 2",
                "$1window: 4"));
            assertThat(daemon.reload()).isNotNull();
            assertThat(daemon.config().job("drop").orElseThrow().rings().getFirst().window()).isEqualTo(4);

            final List<byte[]> late = workers[2].message(0, gradient(elements, 3));
            late.forEach(port::inject);
            final List<byte[]> results = awaitFrames(3 * late.size());
            assertThat(results).hasSize(3 * late.size());
            assertEveryConnectionGotTheSum(results, 3, elements, 6.0f);
        }
    }

    /**
     * Per connection (destination QP), the data parts of the result packets, in order, are the element-wise sum
     * of the gradients built by {@link #gradient}: element i is {@code factor * (i % 100)}.
     */
    private void assertEveryConnectionGotTheSum(
        final List<byte[]> results, final int connections, final int elements, final float factor)
        throws java.io.IOException
    {
        final java.util.Map<Integer, java.io.ByteArrayOutputStream> data = new java.util.TreeMap<>();
        for (final byte[] result : results)
        {
            final RoceFrame frame = new RoceFrame();
            assertThat(frame.wrap(new UnsafeBuffer(result), 0, result.length)).isEqualTo(RoceFrame.OK);
            assertThat(icrc.verify(frame)).isTrue();
            final int start = frame.payloadOffset() +
                (Opcode.has(frame.opcode(), Opcode.IS_FIRST) ? InaHeader.LENGTH : 0);
            data.computeIfAbsent(frame.destQp(), qp -> new java.io.ByteArrayOutputStream())
                .write(result, start, frame.payloadOffset() + frame.payloadLength() - start);
        }
        assertThat(data).hasSize(connections);
        for (final java.io.ByteArrayOutputStream connection : data.values())
        {
            final ByteBuffer sum = ByteBuffer.wrap(connection.toByteArray()).order(ByteOrder.LITTLE_ENDIAN);
            assertThat(sum.remaining()).isEqualTo(elements * Float.BYTES);
            for (int i = 0; i < elements; i++)
            {
                assertThat(sum.getFloat()).as("element %d", i).isEqualTo(factor * (i % 100));
            }
        }
    }

    private static byte[] gradient(final int elements, final int scale)
    {
        final ByteBuffer buffer = ByteBuffer.allocate(elements * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < elements; i++)
        {
            buffer.putFloat((float)scale * (i % 100));
        }
        return buffer.array();
    }

    private List<byte[]> awaitFrames(final int count) throws InterruptedException
    {
        final List<byte[]> frames = new ArrayList<>();
        final long deadline = System.nanoTime() + 10_000_000_000L;
        while (frames.size() < count && System.nanoTime() < deadline)
        {
            frames.addAll(port.drainSent());
            Thread.sleep(5);
        }
        return frames;
    }
}
