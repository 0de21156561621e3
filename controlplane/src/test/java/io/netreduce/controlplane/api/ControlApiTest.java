package io.netreduce.controlplane.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.ListenAddress;
import io.netreduce.controlplane.config.NetreduceConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;

class ControlApiTest
{
    static final String CONFIG = """
        appliance:
          ports: [{ name: eth1 }]
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
        """;

    static final String JOB_B = """
        name: b
        rings:
          - id: 2
            elementType: bf16
            window: 4
            msgLen: 8
            payloadSize: 512
            pmtu: 512
            members:
              - { rank: 0, ip: "fd00::1" }
              - { rank: 1, ip: "fd00::2" }
        """;

    private static final ObjectMapper JSON = new ObjectMapper();

    private final AtomicReference<String> configText = new AtomicReference<>(CONFIG);
    private FakeAppliance appliance;
    private HttpEndpoint endpoint;
    private HttpClient client;
    private String base;

    @BeforeEach
    void start() throws Exception
    {
        final NetreduceConfig config = ConfigLoader.parse(CONFIG);
        appliance = new FakeAppliance(config, () -> ConfigLoader.parse(configText.get()));
        endpoint = HttpEndpoint.start("api-test", ListenAddress.parse("127.0.0.1:0"), new ControlApi(appliance));
        base = "http://" + endpoint.boundAddress();
        client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    }

    @AfterEach
    void stop()
    {
        client.close();
        endpoint.close();
    }

    private HttpResponse<String> call(final String method, final String path, final String body) throws Exception
    {
        final HttpRequest request = HttpRequest.newBuilder(URI.create(base + path))
            .timeout(Duration.ofSeconds(5))
            .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body))
            .build();
        return client.send(request, HttpResponse.BodyHandlers.ofString());
    }

    private static JsonNode json(final HttpResponse<String> response) throws Exception
    {
        assertThat(response.headers().firstValue("content-type")).hasValueSatisfying(
            type -> assertThat(type).startsWith("application/json"));
        return JSON.readTree(response.body());
    }

    @Test
    void shouldGiveClientsTheParametersOfARing() throws Exception
    {
        final HttpResponse<String> response = call("GET", "/v1/rings/1/parameters", null);
        assertThat(response.statusCode()).isEqualTo(200);
        final JsonNode parameters = json(response);
        assertThat(parameters.get("ringId").asInt()).isEqualTo(1);
        assertThat(parameters.get("elementType").asText()).isEqualTo("fp32");
        assertThat(parameters.get("window").asInt()).isEqualTo(8);
        assertThat(parameters.get("inetTag").asText()).isEqualTo("NRED");
        assertThat(parameters.get("resultTag").asText()).isEqualTo("NRES");
        assertThat(parameters.get("worldSize").asInt()).isEqualTo(parameters.get("members").size());
        assertThat(parameters.get("members").get(1).get("ip").asText()).isEqualTo("10.0.0.2");
        assertThat(parameters.has("msgLen")).isTrue();
        assertThat(parameters.has("payloadSize")).isTrue();

        assertThat(call("GET", "/v1/rings/99/parameters", null).statusCode()).isEqualTo(404);
        assertThat(call("DELETE", "/v1/rings/1/parameters", null).statusCode()).isEqualTo(405);
    }

    @Test
    void shouldAnswerHealthAndReadsWhileASlowReloadRuns() throws Exception
    {
        final java.util.concurrent.CountDownLatch reading = new java.util.concurrent.CountDownLatch(1);
        final java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        endpoint.close();
        // A configuration source as slow as a very large file: the reload reads it for as long as the test says.
        appliance = new FakeAppliance(ConfigLoader.parse(CONFIG), () ->
        {
            reading.countDown();
            try
            {
                release.await(10, java.util.concurrent.TimeUnit.SECONDS);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
            return ConfigLoader.parse(configText.get());
        });
        endpoint = HttpEndpoint.start("api-test", ListenAddress.parse("127.0.0.1:0"), new ControlApi(appliance));
        base = "http://" + endpoint.boundAddress();
        final java.util.concurrent.CompletableFuture<HttpResponse<String>> reload =
            java.util.concurrent.CompletableFuture.supplyAsync(() ->
            {
                try
                {
                    return call("POST", "/v1/reload", null);
                }
                catch (final Exception ex)
                {
                    throw new IllegalStateException(ex);
                }
            });
        assertThat(reading.await(5, java.util.concurrent.TimeUnit.SECONDS)).as("the reload is reading").isTrue();

        assertThat(call("GET", "/v1/health", null).statusCode()).isEqualTo(200);
        assertThat(call("GET", "/v1/jobs", null).statusCode()).isEqualTo(200);
        assertThat(call("GET", "/v1/rings/1", null).statusCode()).isEqualTo(200);
        assertThat(reload).as("still reading").isNotDone();

        release.countDown();
        assertThat(reload.get(10, java.util.concurrent.TimeUnit.SECONDS).statusCode()).isEqualTo(200);
    }

    @Test
    void shouldListAndShowJobs() throws Exception
    {
        final HttpResponse<String> list = call("GET", "/v1/jobs", null);
        assertThat(list.statusCode()).isEqualTo(200);
        final JsonNode jobs = json(list);
        assertThat(jobs).hasSize(1);
        assertThat(jobs.get(0).get("name").asText()).isEqualTo("a");
        final JsonNode ring = jobs.get(0).get("rings").get(0);
        assertThat(ring.get("elementType").asText()).isEqualTo("fp32");
        assertThat(ring.get("members").get(1).get("ip").asText()).isEqualTo("10.0.0.2");
        assertThat(ring.get("members").get(1).has("mac")).isFalse();

        final HttpResponse<String> show = call("GET", "/v1/jobs/a", null);
        assertThat(show.statusCode()).isEqualTo(200);
        assertThat(json(show).get("rings").get(0).get("window").asInt()).isEqualTo(8);
    }

    @Test
    void shouldAnswer404ForUnknownJobRingAndEndpoint() throws Exception
    {
        final HttpResponse<String> job = call("GET", "/v1/jobs/nope", null);
        assertThat(job.statusCode()).isEqualTo(404);
        assertThat(json(job).get("error").asText()).isEqualTo("no job 'nope'");

        assertThat(call("DELETE", "/v1/jobs/nope", null).statusCode()).isEqualTo(404);
        assertThat(call("GET", "/v1/rings/99", null).statusCode()).isEqualTo(404);
        final HttpResponse<String> endpointMissing = call("GET", "/v2/jobs", null);
        assertThat(endpointMissing.statusCode()).isEqualTo(404);
        assertThat(json(endpointMissing).get("error").asText()).isEqualTo("no such endpoint: /v2/jobs");
    }

    @Test
    void shouldAddJobFromYamlAndThenShowAndRemoveIt() throws Exception
    {
        final HttpResponse<String> added = call("POST", "/v1/jobs", JOB_B);
        assertThat(added.statusCode()).isEqualTo(201);
        assertThat(json(added).get("name").asText()).isEqualTo("b");

        assertThat(json(call("GET", "/v1/jobs", null))).extracting(node -> node.get("name").asText())
            .containsExactly("a", "b");
        final JsonNode ring = json(call("GET", "/v1/rings/2", null));
        assertThat(ring.get("job").asText()).isEqualTo("b");
        assertThat(ring.get("worldSize").asInt()).isEqualTo(2);
        assertThat(ring.get("aggregatorBytes").asLong()).isEqualTo(2L * 4 * 8 * (2 * (512 + 128) + 512 + 64));

        final HttpResponse<String> removed = call("DELETE", "/v1/jobs/b", null);
        assertThat(removed.statusCode()).isEqualTo(200);
        assertThat(call("GET", "/v1/jobs/b", null).statusCode()).isEqualTo(404);
        assertThat(call("GET", "/v1/rings/2", null).statusCode()).isEqualTo(404);
    }

    @Test
    void shouldAddJobFromJson() throws Exception
    {
        final String body = """
            {"name": "j", "rings": [{"id": 9, "elementType": "int32", "window": 1, "msgLen": 1,
              "payloadSize": 256, "pmtu": 256, "members": [{"rank": 1, "ip": "10.1.0.2"}, {"rank": 0, "ip": "10.1.0.1"}]}]}
            """;

        final HttpResponse<String> added = call("POST", "/v1/jobs", body);

        assertThat(added.statusCode()).isEqualTo(201);
        assertThat(appliance.job("j")).isPresent();
    }

    @Test
    void shouldRefuseInvalidJobWithEveryErrorAndItsPath() throws Exception
    {
        final String broken = JOB_B.replace("fd00::2", "fd00::zz").replace("window: 4", "window: 0")
            .replace("pmtu: 512", "pmtu: 512\n    colour: red");

        final HttpResponse<String> response = call("POST", "/v1/jobs", broken);

        assertThat(response.statusCode()).isEqualTo(400);
        final JsonNode body = json(response);
        assertThat(body.get("error").asText()).isEqualTo("3 configuration errors");
        assertThat(body.get("errors")).extracting(node -> node.get("path").asText() + ": " + node.get("message").asText())
            .containsExactly(
                "rings[0].colour: unknown key (expected one of appliance, elementType, id, inetTag, members, msgLen, payloadSize, pmtu, racks, resultTag, spine, window)",
                "rings[0].window: window 0 is not a power of two in 1..128 " +
                    "(MsgID is 8 bits and the aggregator index is MsgID % 2N)",
                "rings[0].members[1].ip: not an IPv4 or IPv6 address");
        assertThat(appliance.job("b")).isEmpty();
    }

    @Test
    void shouldRefuseJobWhoseRingIdIsTakenAndDuplicateJobName() throws Exception
    {
        final HttpResponse<String> ringTaken = call("POST", "/v1/jobs", JOB_B.replace("id: 2", "id: 1"));
        assertThat(ringTaken.statusCode()).isEqualTo(400);
        assertThat(json(ringTaken).get("errors").get(0).get("path").asText()).isEqualTo("jobs[1].rings[0].id");

        final HttpResponse<String> duplicate = call("POST", "/v1/jobs", JOB_B.replace("name: b", "name: a"));
        assertThat(duplicate.statusCode()).isEqualTo(409);
        assertThat(json(duplicate).get("error").asText()).isEqualTo("job 'a' already exists");
    }

    @Test
    void shouldRefuseEmptyAndMalformedBodies() throws Exception
    {
        assertThat(call("POST", "/v1/jobs", "").statusCode()).isEqualTo(400);
        final HttpResponse<String> notYaml = call("POST", "/v1/jobs", "name: [");
        assertThat(notYaml.statusCode()).isEqualTo(400);
        assertThat(json(notYaml).get("errors").get(0).get("message").asText()).startsWith("not valid YAML at line");
    }

    @Test
    void shouldAnswer405WithAllowHeader() throws Exception
    {
        final HttpResponse<String> response = call("PUT", "/v1/jobs", "x");

        assertThat(response.statusCode()).isEqualTo(405);
        assertThat(response.headers().firstValue("allow")).hasValue("GET, POST");
        assertThat(call("GET", "/v1/reload", null).statusCode()).isEqualTo(405);
        assertThat(call("POST", "/v1/counters", null).statusCode()).isEqualTo(405);
    }

    @Test
    void shouldServeCountersCltAndOccupancyFromTheAppliance() throws Exception
    {
        appliance.counters.add(new CounterValue("netreduce_dataplane_frames_received", Map.of(), "frames received",
            1234L));
        appliance.counters.add(new CounterValue("netreduce_dataplane_drops", Map.of("reason", "bad_rank"),
            "drop: rank outside the ring", 2L));
        appliance.clt.add(new CltEntry("10.0.0.1", "10.0.0.2", 17, 1, 0, 5, 1000));
        appliance.occupancy.put(1, new RingOccupancy(1, 2, List.of(
            new RingOccupancy.AggregatorOccupancy(5, 3, List.of(0), List.of(1), 2_000_000))));

        final JsonNode counters = json(call("GET", "/v1/counters", null));
        assertThat(counters.get("netreduce_dataplane_frames_received").get("value").asLong()).isEqualTo(1234);
        final JsonNode drops = counters.get("netreduce_dataplane_drops{reason=\"bad_rank\"}");
        assertThat(drops.get("value").asLong()).isEqualTo(2);
        assertThat(drops.get("description").asText()).isEqualTo("drop: rank outside the ring");
        assertThat(drops.get("metric").asText()).isEqualTo("netreduce_dataplane_drops");
        assertThat(drops.get("labels").get("reason").asText()).isEqualTo("bad_rank");

        final JsonNode clt = json(call("GET", "/v1/tables/clt", null));
        assertThat(clt.get(0).get("dstQpn").asInt()).isEqualTo(17);
        assertThat(clt.get(0).get("psn0").asLong()).isEqualTo(1000);

        final CttEntry.Connection up = new CttEntry.Connection(1, "10.0.0.2", "10.0.1.1");
        appliance.ctt.add(new CttEntry(1, "a", "leaf", 0, "up", "install", up, true, 17, 5, 1000,
            List.of(new CttEntry.Connection(0, "10.0.0.1", "10.0.0.2"), up), List.of(up)));
        final JsonNode ctt = json(call("GET", "/v1/tables/ctt", null));
        assertThat(ctt.get(0).get("connection").get("dstIp").asText()).isEqualTo("10.0.1.1");
        assertThat(ctt.get(0).get("triggers")).hasSize(2);
        assertThat(call("POST", "/v1/tables/ctt", "{}").statusCode()).isEqualTo(405);

        final JsonNode occupancy = json(call("GET", "/v1/rings/1/occupancy", null));
        assertThat(occupancy.get("incomplete").get(0).get("missingRanks").get(0).asInt()).isEqualTo(1);
        assertThat(call("GET", "/v1/rings/7/occupancy", null).statusCode()).isEqualTo(404);
        assertThat(call("GET", "/v1/rings/x/occupancy", null).statusCode()).isEqualTo(400);
        assertThat(call("GET", "/v1/rings/256", null).statusCode()).isEqualTo(400);
    }

    @Test
    void shouldAnswer501WhenTheApplianceCannotAnswer() throws Exception
    {
        final HttpResponse<String> response = call("GET", "/v1/latency", null);

        assertThat(response.statusCode()).isEqualTo(501);
        assertThat(json(response).get("error").asText()).isEqualTo("not available: no histograms in this fake");
    }

    @Test
    void shouldReloadAndReportTheDifference() throws Exception
    {
        configText.set(CONFIG.replace("window: 8", "window: 16") + JOB_B.indent(4).replaceFirst("    name", "  - name"));

        final HttpResponse<String> response = call("POST", "/v1/reload", null);

        assertThat(response.statusCode()).isEqualTo(200);
        final JsonNode result = json(response);
        assertThat(result.get("jobsAdded")).extracting(JsonNode::asText).containsExactly("b");
        assertThat(result.get("ringsChanged")).extracting(JsonNode::asText).containsExactly("a/1");
        assertThat(result.get("ringsAdded")).extracting(JsonNode::asText).containsExactly("a/1", "b/2");
        assertThat(result.get("restartRequired").asBoolean()).isFalse();
        assertThat(appliance.reloads).isEqualTo(1);
    }

    @Test
    void shouldRefuseReloadOfBrokenConfigAndKeepRunningOne() throws Exception
    {
        configText.set(CONFIG.replace("ip: 10.0.0.2", "ip: 10.0.0.1"));

        final HttpResponse<String> response = call("POST", "/v1/reload", null);

        assertThat(response.statusCode()).isEqualTo(400);
        assertThat(json(response).get("errors").get(0).get("path").asText()).isEqualTo("jobs[0].rings[0].members[1].ip");
        assertThat(appliance.job("a").orElseThrow().rings().getFirst().members().get(1).ip()).isEqualTo("10.0.0.2");
    }

    @Test
    void shouldStartAndStopCaptures() throws Exception
    {
        final HttpResponse<String> started = call("POST", "/v1/captures", "{\"port\":\"eth1\",\"file\":\"/tmp/x.pcap\"}");
        assertThat(started.statusCode()).isEqualTo(201);
        final String id = json(started).get("id").asText();

        final HttpResponse<String> stopped = call("DELETE", "/v1/captures/" + id, null);
        assertThat(stopped.statusCode()).isEqualTo(200);
        assertThat(json(stopped).get("running").asBoolean()).isFalse();
        assertThat(call("DELETE", "/v1/captures/zzz", null).statusCode()).isEqualTo(404);
        assertThat(call("POST", "/v1/captures", "{\"file\":\"/tmp/x.pcap\"}").statusCode()).isEqualTo(400);
        assertThat(call("POST", "/v1/captures", "{\"port\":\"eth1\",\"file\":\"/tmp/x\",\"bogus\":1}").statusCode())
            .isEqualTo(400);
        assertThat(call("POST", "/v1/captures", "{\"port\":\"eth1\",\"file\":\"/tmp/x\",\"maxPackets\":-1}")
            .statusCode()).isEqualTo(400);
    }

    @Test
    void shouldServeOverUnixDomainSocket(@TempDir final Path dir) throws Exception
    {
        final Path socket = dir.resolve("api.sock");
        try (HttpEndpoint unix = HttpEndpoint.start("api-unix", ListenAddress.parse("unix:" + socket),
                new ControlApi(appliance));
            ApiClient unixClient = new ApiClient(unix.boundAddress(), Duration.ofSeconds(5)))
        {
            assertThat(Files.exists(socket)).isTrue();
            final ApiClient.Response response = unixClient.send("GET", "/v1/jobs/a", null, null);
            assertThat(response.status()).isEqualTo(200);
            assertThat(JSON.readTree(response.body()).get("name").asText()).isEqualTo("a");
            final ApiClient.Response added = unixClient.send("POST", "/v1/jobs", JOB_B, "application/yaml");
            assertThat(added.status()).isEqualTo(201);
        }
        assertThat(Files.exists(socket)).isFalse();
    }

    @Test
    void shouldReportUnreachableApiAsIOException() throws Exception
    {
        final ListenAddress closed = endpoint.boundAddress();
        endpoint.close();
        endpoint = HttpEndpoint.start("api-test", ListenAddress.parse("127.0.0.1:0"), new ControlApi(appliance));
        try (ApiClient tcpClient = new ApiClient(closed, Duration.ofSeconds(2)))
        {
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> tcpClient.send("GET", "/v1/jobs", null, null))
                .isInstanceOf(java.io.IOException.class).hasMessageContaining("cannot reach");
        }
    }
}
