package io.netreduce.daemon;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netreduce.controlplane.api.ApiClient;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.RingRef;
import io.netreduce.controlplane.config.ValidationOptions;
import io.netreduce.dataplane.capture.CaptureFileWriter;
import io.netreduce.protocol.pcap.PcapReader;
import io.netreduce.protocol.pcap.PcapRecord;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.testing.RingWorker;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Predicate;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Captures through the control API of a daemon running its real dataplane on a memory port: the files land in
 * the capture directory and hold exactly the frames that arrived (or were dropped, with why); requests for files
 * elsewhere are refused.
 */
@Timeout(60)
class CaptureApiTest
{
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String CONFIG = """
        appliance:
          ports:
            - name: mem0
          memoryBudget: 64MiB
          captureDirectory: %s
          api:
            listen: 127.0.0.1:0
            tokenFile: /tmp/netreduce-test-api.token
          metrics:
            listen: 127.0.0.1:0
        jobs:
          - name: pair
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

    @TempDir
    Path dir;

    private final MemoryPort port = new MemoryPort("mem0");
    private Path captures;
    private NetreduceConfig config;
    private Daemon daemon;
    private ApiClient api;

    @BeforeEach
    void start() throws Exception
    {
        // Not there yet: the daemon creates it for the first capture.
        captures = dir.resolve("var/captures");
        final Path file = dir.resolve("netreduce.yaml");
        Files.writeString(file, CONFIG.formatted(captures));
        config = ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY);
        daemon = Daemon.start(config, () -> ConfigLoader.load(file, ValidationOptions.DOCUMENT_ONLY),
            ValidationOptions.DOCUMENT_ONLY, new PacketDataplane(portConfig -> port));
        api = new ApiClient(daemon.apiAddress(), Duration.ofSeconds(10), Daemon.apiToken());
    }

    @AfterEach
    void stop() throws Exception
    {
        api.close();
        daemon.close();
    }

    @Test
    void shouldCaptureAPortAndItsDropsByteIdenticalWithReasons() throws Exception
    {
        final JsonNode portCapture = post("{\"port\":\"mem0\",\"file\":\"port.pcap\"}", 201);
        final JsonNode dropCapture = post("{\"drops\":true,\"file\":\"" + captures.resolve("drops.pcap") + "\"}", 201);
        assertThat(portCapture.path("running").asBoolean()).isTrue();
        assertThat(dropCapture.path("reasonsFile").asText()).isEqualTo(captures.resolve("drops.pcap.reasons").toString());

        final RingDefinition ring = PacketDataplane.toDataplane(
            new RingRef("pair", config.job("pair").orElseThrow().rings().getFirst()));
        final List<byte[]> input = new ArrayList<>();
        for (int rank = 0; rank < 2; rank++)
        {
            final RingWorker worker = RingWorker.of(ring, rank, 100 + 1000 * rank);
            input.addAll(worker.message(0, new byte[worker.gradientBytes()]));
        }
        final byte[] corrupt = input.getFirst().clone();
        corrupt[corrupt.length - 10] ^= 0x40;
        input.add(corrupt);
        input.forEach(port::inject);

        final String portId = portCapture.path("id").asText();
        final String dropId = dropCapture.path("id").asText();
        awaitCapture(portId, capture -> capture.path("packets").asLong() == input.size());
        awaitCapture(dropId, capture -> capture.path("packets").asLong() == 1);
        final JsonNode stopped = delete(portId);
        assertThat(stopped.path("running").asBoolean()).isFalse();
        assertThat(stopped.path("packets").asLong()).isEqualTo(input.size());
        assertThat(stopped.path("lost").asLong()).isZero();
        assertThat(delete(dropId).path("packets").asLong()).isEqualTo(1);

        final Path portFile = captures.resolve("port.pcap");
        assertThat(portCapture.path("file").asText()).isEqualTo(portFile.toString());
        assertThat(frames(portFile)).usingElementComparator(Arrays::compare).containsExactlyElementsOf(input);
        final Path dropFile = captures.resolve("drops.pcap");
        assertThat(frames(dropFile)).usingElementComparator(Arrays::compare).containsExactly(corrupt);
        assertThat(Files.readAllLines(CaptureFileWriter.reasonsFileOf(dropFile)))
            .containsExactly(CaptureFileWriter.REASONS_HEADER, "1\tmem0\tbad_icrc");

        // netreduce pcap verify agrees: the ring packets are intact, the one dropped frame's ICRC is bad.
        assertThat(pcapVerify(portFile)).contains("frames=" + input.size()).contains("icrc_ok=" + (input.size() - 1))
            .contains("icrc_bad=1");
        assertThat(pcapVerify(dropFile)).contains("1 RC_RDMA_WRITE_FIRST psn=100").contains("icrc=bad");

        try (ApiClient metrics = new ApiClient(daemon.metricsAddress(), Duration.ofSeconds(5)))
        {
            assertThat(metrics.send("GET", "/metrics", null, null).body())
                .contains("netreduce_dataplane_captured_total " + (input.size() + 1) + ".0")
                .contains("netreduce_dataplane_capture_lost_total 0.0");
        }
    }

    @Test
    void shouldRefuseFilesOutsideTheCaptureDirectoryUnknownPortsAndSecondCapturesOfAPort() throws Exception
    {
        final Path outside = dir.resolve("outside");
        Files.createDirectories(outside);
        Files.createDirectories(captures);
        Files.createSymbolicLink(captures.resolve("link"), outside);

        assertThat(error(post("{\"port\":\"mem0\",\"file\":\"" + outside.resolve("x.pcap") + "\"}", 400)))
            .contains("is outside the capture directory " + captures);
        assertThat(error(post("{\"port\":\"mem0\",\"file\":\"../outside/x.pcap\"}", 400)))
            .contains("is outside the capture directory");
        assertThat(error(post("{\"port\":\"mem0\",\"file\":\"link/x.pcap\"}", 400)))
            .contains("through a symbolic link");
        assertThat(error(post("{\"port\":\"mem0\",\"file\":\"\"}", 400))).contains("'file' is required");
        assertThat(error(post("{\"port\":\"mem0\",\"file\":\"nodir/x.pcap\"}", 400))).contains("does not exist");
        assertThat(error(post("{\"port\":\"eth9\",\"file\":\"x.pcap\"}", 400)))
            .isEqualTo("no port 'eth9'; the appliance's ports are mem0");
        try (var files = Files.list(outside))
        {
            assertThat(files).isEmpty();
        }

        Files.writeString(captures.resolve("taken.pcap"), "keep me");
        assertThat(error(post("{\"port\":\"mem0\",\"file\":\"taken.pcap\"}", 409))).contains("exists");
        assertThat(Files.readString(captures.resolve("taken.pcap"))).isEqualTo("keep me");

        final String id = post("{\"port\":\"mem0\",\"file\":\"one.pcap\"}", 201).path("id").asText();
        assertThat(error(post("{\"port\":\"mem0\",\"file\":\"two.pcap\"}", 409)))
            .isEqualTo("port mem0 is already being captured by capture " + id + "; stop it first");
        assertThat(Files.exists(captures.resolve("two.pcap"))).isFalse();
        // Drops of the same port are a different tap.
        post("{\"port\":\"mem0\",\"drops\":true,\"file\":\"drops.pcap\"}", 201);
        assertThat(api.send("DELETE", "/v1/captures/99", null, null).status()).isEqualTo(404);
    }

    @Test
    void shouldEndACaptureByItselfAfterMaxPacketsAndFreeThePort() throws Exception
    {
        final String id = post("{\"port\":\"mem0\",\"file\":\"three.pcap\",\"maxPackets\":3}", 201)
            .path("id").asText();
        final List<byte[]> input = new ArrayList<>();
        for (int i = 0; i < 10; i++)
        {
            final byte[] frame = new byte[64 + i];
            Arrays.fill(frame, (byte)i);
            frame[12] = 0x08;
            frame[13] = 0x06;
            input.add(frame);
            port.inject(frame);
        }
        final JsonNode ended = awaitCapture(id, capture -> !capture.path("running").asBoolean());
        assertThat(ended.path("packets").asLong()).isEqualTo(3);
        assertThat(ended.has("error")).isFalse();
        assertThat(frames(captures.resolve("three.pcap"))).usingElementComparator(Arrays::compare)
            .containsExactlyElementsOf(input.subList(0, 3));
        assertThat(delete(id).path("packets").asLong()).isEqualTo(3);
        post("{\"port\":\"mem0\",\"file\":\"again.pcap\"}", 201);
    }

    @Test
    void shouldDriveCapturesFromTheCtlCommand() throws Exception
    {
        final String[] started = ctl("capture", "start", "--port", "mem0", "--file", "ctl.pcap", "--max", "2");
        assertThat(started[0]).isEqualTo("0");
        assertThat(started[1]).isEqualTo("capture 1 started: port mem0 -> " + captures.resolve("ctl.pcap") +
            " (at most 2 frames)\n");
        final String[] drops = ctl("capture", "start", "--drops", "--file", "d.pcap");
        assertThat(drops[1]).contains("capture 2 started: drops -> ")
            .contains("drop reasons -> " + captures.resolve("d.pcap.reasons"));

        final byte[] frame = new byte[60];
        frame[12] = 0x08;
        frame[13] = 0x06;
        port.inject(frame);
        awaitCapture("1", capture -> capture.path("packets").asLong() == 1);
        final String[] list = ctl("captures");
        assertThat(list[1]).contains("ID  WHAT       STATE    FRAMES  LOST  FILE")
            .contains("1   port mem0  running  1/2     0     " + captures.resolve("ctl.pcap"))
            .contains("2   drops      running  0       0     " + captures.resolve("d.pcap"));

        final String[] stopped = ctl("capture", "stop", "1");
        assertThat(stopped[1]).isEqualTo("capture 1 stopped: 1 frame(s) written to " + captures.resolve("ctl.pcap") +
            ", 0 lost\n");
        assertThat(frames(captures.resolve("ctl.pcap"))).usingElementComparator(Arrays::compare).containsExactly(frame);

        final String[] outside = ctl("capture", "start", "--port", "mem0", "--file", "/etc/evil.pcap");
        assertThat(outside[0]).isEqualTo("1");
        assertThat(outside[2]).startsWith("error: '/etc/evil.pcap' is outside the capture directory");
        assertThat(ctl("capture", "stop", "7")[2]).isEqualTo("error: no capture '7'\n");
    }

    private String[] ctl(final String... args)
    {
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        final CommandLine commandLine = NetreduceMain.commandLine();
        commandLine.setOut(new PrintWriter(out, true));
        commandLine.setErr(new PrintWriter(err, true));
        final List<String> full = new ArrayList<>(List.of("ctl", "--api", daemon.apiAddress().toString(),
            "--token-file", "/tmp/netreduce-test-api.token"));
        full.addAll(List.of(args));
        final int status = commandLine.execute(full.toArray(new String[0]));
        return new String[]{ Integer.toString(status), out.toString(), err.toString() };
    }

    private static String pcapVerify(final Path file)
    {
        final StringWriter out = new StringWriter();
        final CommandLine commandLine = NetreduceMain.commandLine();
        commandLine.setOut(new PrintWriter(out, true));
        commandLine.setErr(new PrintWriter(new StringWriter(), true));
        commandLine.execute("pcap", "verify", file.toString());
        return out.toString();
    }

    private JsonNode post(final String body, final int status) throws Exception
    {
        final ApiClient.Response response = api.send("POST", "/v1/captures", body, "application/json");
        assertThat(response.status()).as(response.body()).isEqualTo(status);
        return JSON.readTree(response.body());
    }

    private JsonNode delete(final String id) throws Exception
    {
        final ApiClient.Response response = api.send("DELETE", "/v1/captures/" + id, null, null);
        assertThat(response.status()).as(response.body()).isEqualTo(200);
        return JSON.readTree(response.body());
    }

    private static String error(final JsonNode answer)
    {
        return answer.path("error").asText();
    }

    private JsonNode awaitCapture(final String id, final Predicate<JsonNode> condition) throws Exception
    {
        final long deadline = System.nanoTime() + 10_000_000_000L;
        JsonNode last = null;
        while (System.nanoTime() < deadline)
        {
            for (final JsonNode capture : JSON.readTree(api.send("GET", "/v1/captures", null, null).body()))
            {
                if (capture.path("id").asText().equals(id))
                {
                    last = capture;
                    if (condition.test(capture))
                    {
                        return capture;
                    }
                }
            }
            Thread.sleep(10);
        }
        throw new AssertionError("capture " + id + " never got there; last seen " + last);
    }

    private static List<byte[]> frames(final Path file) throws Exception
    {
        final List<byte[]> frames = new ArrayList<>();
        try (PcapReader reader = PcapReader.open(file))
        {
            final PcapRecord record = new PcapRecord();
            while (reader.next(record))
            {
                assertThat(record.isTruncated()).isFalse();
                frames.add(record.bytes().clone());
            }
        }
        return frames;
    }
}
