package io.netreduce.controlplane.metrics;

import io.netreduce.controlplane.api.HttpEndpoint;
import io.netreduce.controlplane.api.HttpRequestData;
import io.netreduce.controlplane.api.HttpResponseData;
import io.netreduce.controlplane.api.RequestHandler;
import io.netreduce.controlplane.config.ListenAddress;
import io.prometheus.metrics.config.EscapingScheme;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Map;

/**
 * Serves a Prometheus registry at {@code GET /metrics} in the Prometheus text format, written by the client
 * library's {@link PrometheusTextFormatWriter}. Shares the control API's small Netty server.
 */
public final class MetricsEndpoint implements RequestHandler, AutoCloseable
{
    /** The scrape path. */
    public static final String PATH = "/metrics";

    private final PrometheusRegistry registry;
    private final PrometheusTextFormatWriter writer = PrometheusTextFormatWriter.create();
    private HttpEndpoint endpoint;

    /**
     * @param registry the registry to expose.
     */
    public MetricsEndpoint(final PrometheusRegistry registry)
    {
        this.registry = registry;
    }

    /**
     * @param address where to listen.
     * @return this, serving.
     * @throws InterruptedException if interrupted while binding.
     */
    public MetricsEndpoint start(final ListenAddress address) throws InterruptedException
    {
        endpoint = HttpEndpoint.start("metrics", address, this);
        return this;
    }

    /**
     * @return the bound address; only after {@link #start}.
     */
    public ListenAddress boundAddress()
    {
        return endpoint.boundAddress();
    }

    @Override
    public HttpResponseData handle(final HttpRequestData request)
    {
        if (!PATH.equals(request.path()))
        {
            return HttpResponseData.json(404, "{\"error\":\"metrics are at " + PATH + "\"}");
        }
        if (!"GET".equals(request.method()) && !"HEAD".equals(request.method()))
        {
            final HttpResponseData body = HttpResponseData.json(405, "{\"error\":\"method not allowed; use GET\"}");
            return new HttpResponseData(405, body.contentType(), body.body(), Map.of("Allow", "GET"));
        }
        return new HttpResponseData(200, writer.getContentType(), scrape(), Map.of());
    }

    /**
     * @return the registry in the Prometheus text format.
     */
    public byte[] scrape()
    {
        final ByteArrayOutputStream out = new ByteArrayOutputStream(8192);
        try
        {
            writer.write(out, registry.scrape(), EscapingScheme.UNDERSCORE_ESCAPING);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        return out.toByteArray();
    }

    @Override
    public void close()
    {
        if (endpoint != null)
        {
            endpoint.close();
        }
    }
}
