package io.netreduce.controlplane.metrics;

import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.ListenAddress;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

class MetricsEndpointTest
{
    /** Stands in for counters the dataplane publishes: read at scrape time, changed between scrapes. */
    private final AtomicLong aggregated = new AtomicLong(100);

    private final MetricsSource dataplane = sink ->
    {
        sink.counter("netreduce_packets_aggregated", "Packets summed into an aggregator.", aggregated.get(),
            "job", "bert", "ring", "10");
        sink.counter("netreduce_packets_aggregated", "Packets summed into an aggregator.", 7,
            "job", "dlrm", "ring", "20");
        sink.counter("netreduce_drops_total", "Frames dropped, by reason.", 3, "reason", "unknown_rank");
        sink.gauge("netreduce_aggregators_in_use", "Aggregators holding a partial sum.", 12,
            "job", "bert", "ring", "10");
        sink.histogram("netreduce_aggregation_latency_seconds", "First packet in to result out.",
            new double[] { 1e-6, 1e-5, Double.POSITIVE_INFINITY }, new long[] { 5, 3, 2 }, 0.0042,
            "job", "bert", "ring", "10");
    };

    private static String get(final HttpClient client, final String url) throws Exception
    {
        final HttpResponse<String> response = client.send(HttpRequest.newBuilder(URI.create(url))
            .timeout(Duration.ofSeconds(5)).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).isEqualTo(200);
        assertThat(response.headers().firstValue("content-type")).hasValueSatisfying(
            type -> assertThat(type).startsWith("text/plain; version=0.0.4"));
        return response.body();
    }

    private static PrometheusTextParser.Sample sample(
        final Map<String, PrometheusTextParser.Family> families, final String family, final String name,
        final Map<String, String> labels)
    {
        return families.get(family).samples().stream()
            .filter(s -> s.name().equals(name) && s.labels().equals(labels))
            .findFirst().orElseThrow(() -> new AssertionError("no " + name + labels + " in " + families.get(family)));
    }

    @Test
    void shouldExposeSourceCountersGaugesAndHistogramsWithJobAndRingLabels() throws Exception
    {
        final NetreduceConfig config = ConfigLoader.load(
            java.nio.file.Path.of(System.getProperty("netreduce.repo.root", "..")).resolve("config/two-jobs.yaml"));
        final PrometheusRegistry registry = ControlPlaneMetrics.registryWith(
            MetricsSource.composite(List.of(dataplane, new ConfigMetricsSource(() -> config))));
        final ControlPlaneMetrics controlPlane = new ControlPlaneMetrics(registry);
        controlPlane.reloadApplied();

        try (MetricsEndpoint endpoint = new MetricsEndpoint(registry).start(ListenAddress.parse("127.0.0.1:0"));
            HttpClient client = HttpClient.newHttpClient())
        {
            final String url = "http://" + endpoint.boundAddress() + MetricsEndpoint.PATH;
            final Map<String, PrometheusTextParser.Family> first = PrometheusTextParser.parse(get(client, url));

            assertThat(first.get("netreduce_packets_aggregated_total").type()).isEqualTo("counter");
            assertThat(first.get("netreduce_packets_aggregated_total").help()).isEqualTo("Packets summed into an aggregator.");
            assertThat(sample(first, "netreduce_packets_aggregated_total", "netreduce_packets_aggregated_total",
                Map.of("job", "bert", "ring", "10")).value()).isEqualTo(100);
            assertThat(sample(first, "netreduce_packets_aggregated_total", "netreduce_packets_aggregated_total",
                Map.of("job", "dlrm", "ring", "20")).value()).isEqualTo(7);
            assertThat(sample(first, "netreduce_drops_total", "netreduce_drops_total",
                Map.of("reason", "unknown_rank")).value()).isEqualTo(3);
            assertThat(sample(first, "netreduce_aggregators_in_use", "netreduce_aggregators_in_use",
                Map.of("job", "bert", "ring", "10")).value()).isEqualTo(12);

            final String histogram = "netreduce_aggregation_latency_seconds";
            assertThat(first.get(histogram).type()).isEqualTo("histogram");
            final Map<String, String> ring10 = Map.of("job", "bert", "ring", "10");
            assertThat(sample(first, histogram, histogram + "_bucket", withLe(ring10, "1.0E-6")).value()).isEqualTo(5);
            assertThat(sample(first, histogram, histogram + "_bucket", withLe(ring10, "1.0E-5")).value()).isEqualTo(8);
            assertThat(sample(first, histogram, histogram + "_bucket", withLe(ring10, "+Inf")).value()).isEqualTo(10);
            assertThat(sample(first, histogram, histogram + "_count", ring10).value()).isEqualTo(10);
            assertThat(sample(first, histogram, histogram + "_sum", ring10).value()).isCloseTo(0.0042, within(1e-12));

            assertThat(sample(first, "netreduce_ring_world_size", "netreduce_ring_world_size",
                Map.of("job", "bert-large", "ring", "11")).value()).isEqualTo(4);
            assertThat(sample(first, "netreduce_memory_budget_bytes", "netreduce_memory_budget_bytes", Map.of())
                .value()).isEqualTo(512L << 20);
            assertThat(sample(first, "netreduce_config_reloads_total", "netreduce_config_reloads_total",
                Map.of("result", "applied")).value()).isEqualTo(1);
            assertThat(sample(first, "netreduce_config_reloads_total", "netreduce_config_reloads_total",
                Map.of("result", "refused")).value()).isEqualTo(0);

            aggregated.set(250);
            final Map<String, PrometheusTextParser.Family> second = PrometheusTextParser.parse(get(client, url));
            assertThat(sample(second, "netreduce_packets_aggregated_total", "netreduce_packets_aggregated_total",
                Map.of("job", "bert", "ring", "10")).value()).isEqualTo(250);
        }
    }

    @Test
    void shouldLeaveOutASampleThatContradictsItsFamilyAndKeepTheRest()
    {
        final PrometheusRegistry registry = ControlPlaneMetrics.registryWith(sink ->
        {
            sink.gauge("netreduce_x", "x", 1, "ring", "1");
            sink.counter("netreduce_x", "x", 2, "ring", "2");
            sink.gauge("netreduce_y", "y", 3);
        });

        final String text = new String(new MetricsEndpoint(registry).scrape(), java.nio.charset.StandardCharsets.UTF_8);
        final Map<String, PrometheusTextParser.Family> families = PrometheusTextParser.parse(text);

        assertThat(families.get("netreduce_x").samples()).extracting(PrometheusTextParser.Sample::value)
            .containsExactly(1.0);
        assertThat(families.get("netreduce_y").samples()).hasSize(1);
    }

    @Test
    void shouldRefuseOtherPathsAndMethods()
    {
        final MetricsEndpoint endpoint = new MetricsEndpoint(new PrometheusRegistry());

        assertThat(endpoint.handle(new io.netreduce.controlplane.api.HttpRequestData("GET", "/", Map.of(), null, ""))
            .status()).isEqualTo(404);
        assertThat(endpoint.handle(new io.netreduce.controlplane.api.HttpRequestData("POST", "/metrics", Map.of(),
            null, "")).status()).isEqualTo(405);
    }

    private static Map<String, String> withLe(final Map<String, String> labels, final String le)
    {
        final Map<String, String> copy = new java.util.LinkedHashMap<>(labels);
        copy.put("le", le);
        return copy;
    }

    @Test
    void parserShouldRejectMalformedText()
    {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> PrometheusTextParser.parse("# TYPE a counter\na_total{x=1} 2\n"))
            .isInstanceOf(IllegalArgumentException.class);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> PrometheusTextParser.parse("b 1\n"))
            .hasMessageContaining("outside its family");
    }
}
